package web

// The run history of a corpus and service with the diff between two runs (/runs), and the
// tasks of one cell of that diff (/runs/cell).

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/reports"
)

type runRow struct {
	reports.Run
	Bar  []barPart
	Done int64
}

type runsPage struct {
	Corpus, Service string
	Runs            []runRow
	Chart           runChart
	From, To        int64
	Matrix          *diffMatrix
}

func (s *Server) runs(r *http.Request) (view, error) {
	corpus, service, scope, err := s.scopeParams(r)
	if err != nil {
		return view{}, err
	}
	runs, err := s.reports.Runs(r.Context(), scope)
	if err != nil {
		return view{}, err
	}
	p := runsPage{Corpus: corpus, Service: service, Chart: newRunChart(runs)}
	for _, run := range runs {
		p.Runs = append(p.Runs, runRow{Run: run})
	}
	q := r.URL.Query()
	if q.Get("from") != "" || q.Get("to") != "" {
		d, err := diffParams(q, scope, runs)
		if err != nil {
			return view{}, err
		}
		cells, err := s.reports.DiffMatrix(r.Context(), d)
		if err != nil {
			return view{}, err
		}
		p.From, p.To = d.From, d.To
		p.Matrix = newDiffMatrix(corpus, service, d, cells)
	}
	return view{Page: "runs", Title: "Runs " + corpus + " / " + service, Data: p}, nil
}

// diffParams reads from (a closed run of the scope) and to (a later run of it; 0 or "current":
// the open one).
func diffParams(q url.Values, scope queue.Scope, runs []reports.Run) (reports.DiffRuns, error) {
	d := reports.DiffRuns{Scope: scope}
	known := map[int64]reports.Run{}
	for _, r := range runs {
		known[r.ID] = r
	}
	from, err := strconv.ParseInt(q.Get("from"), 10, 64)
	if err != nil {
		return d, badRequest("from %q: want a run id", q.Get("from"))
	}
	if run, ok := known[from]; !ok || run.EndedAt == nil {
		return d, badRequest("from %d: not a closed run of this corpus and service", from)
	}
	d.From = from
	if to := q.Get("to"); to != "" && to != "current" && to != "0" {
		n, err := strconv.ParseInt(to, 10, 64)
		if err != nil {
			return d, badRequest("to %q: want a run id or current", to)
		}
		run, ok := known[n]
		switch {
		case !ok:
			return d, badRequest("to %d: not a run of this corpus and service", n)
		case n <= from:
			return d, badRequest("to %d: want a run after from %d", n, from)
		case run.EndedAt != nil:
			d.To = n
		}
	}
	return d, nil
}

// diffStatuses are the matrix's rows and columns.
var diffStatuses = []queue.Status{queue.StatusNoProblem, queue.StatusWarning, queue.StatusError, queue.StatusFatal,
	queue.StatusInvalid, queue.StatusTODO, queue.StatusDispatched, queue.StatusBlocked}

type diffMatrix struct {
	Cols []string
	Rows []diffMatrixRow
}

type diffMatrixRow struct {
	From  string
	Cells []diffMatrixCell
}

type diffMatrixCell struct {
	Tasks int64
	URL   string
	Same  bool
}

func newDiffMatrix(corpus, service string, d reports.DiffRuns, cells []reports.DiffCell) *diffMatrix {
	m := &diffMatrix{}
	for _, st := range diffStatuses {
		m.Cols = append(m.Cols, statusName(st))
	}
	to := strconv.FormatInt(d.To, 10)
	index := func(st queue.Status) int {
		if st <= queue.StatusBlocked {
			st = queue.StatusBlocked
		}
		for i, x := range diffStatuses {
			if x == st {
				return i
			}
		}
		return -1
	}
	grid := make([][]int64, len(diffStatuses)+1) // the last row: not a task then
	for i := range grid {
		grid[i] = make([]int64, len(diffStatuses))
	}
	for _, c := range cells {
		row := len(diffStatuses)
		if c.From != nil {
			row = index(*c.From)
		}
		if col := index(c.To); row >= 0 && col >= 0 {
			grid[row][col] += c.Tasks
		}
	}
	for i, cells := range grid {
		from, fromName := "new", "(new task)"
		if i < len(diffStatuses) {
			from, fromName = strconv.Itoa(int(diffStatuses[i])), statusName(diffStatuses[i])
		}
		row := diffMatrixRow{From: fromName}
		for j, n := range cells {
			c := diffMatrixCell{Tasks: n, Same: i == j}
			if n > 0 {
				c.URL = link("/runs/cell", "corpus", corpus, "service", service, "from", strconv.FormatInt(d.From, 10),
					"to", to, "fs", from, "ts", strconv.Itoa(int(diffStatuses[j])))
			}
			row.Cells = append(row.Cells, c)
		}
		m.Rows = append(m.Rows, row)
	}
	return m
}

func (s *Server) diffCell(r *http.Request) (view, error) {
	corpus, service, scope, err := s.scopeParams(r)
	if err != nil {
		return view{}, err
	}
	q := r.URL.Query()
	runs, err := s.reports.Runs(r.Context(), scope)
	if err != nil {
		return view{}, err
	}
	d, err := diffParams(q, scope, runs)
	if err != nil {
		return view{}, err
	}
	var from *queue.Status
	if fs := q.Get("fs"); fs != "new" {
		st, err := statusParam(fs)
		if err != nil {
			return view{}, err
		}
		from = &st
	}
	to, err := statusParam(q.Get("ts"))
	if err != nil {
		return view{}, err
	}
	limit, offset, err := pageParams(q)
	if err != nil {
		return view{}, err
	}
	tasks, err := s.reports.DiffCellTasks(r.Context(), d, from, to, limit, offset)
	if err != nil {
		return view{}, err
	}
	fromName := "(new task)"
	if from != nil {
		fromName = statusName(*from)
	}
	base := []string{"corpus", corpus, "service", service, "from", q.Get("from"), "to", q.Get("to"), "fs", q.Get("fs"), "ts", q.Get("ts"), "limit", strconv.Itoa(limit)}
	var prev, next string
	if offset > 0 {
		prev = link("/runs/cell", append(base, "offset", strconv.Itoa(max(0, offset-limit)))...)
	}
	if len(tasks) == limit && offset+limit <= reports.ReportMaxOffset {
		next = link("/runs/cell", append(base, "offset", strconv.Itoa(offset+limit))...)
	}
	return view{Page: "cell", Title: "Diff cell", Data: struct {
		Corpus, Service, FromStatus, ToStatus string
		From, To                              int64
		Tasks                                 []reports.DiffTask
		Back, Prev, Next                      string
	}{corpus, service, fromName, statusName(to), d.From, d.To, tasks,
		link("/runs", "corpus", corpus, "service", service, "from", q.Get("from"), "to", q.Get("to")), prev, next}}, nil
}
