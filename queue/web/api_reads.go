package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/dispatch"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/reaper"
	"github.com/cortexq/cortexq/queue/reports"
)

// apiScope looks up the corpus and service of the request's path: either unknown is a 404.
func (s *Server) apiScope(r *http.Request) (corpus, service string, scope queue.Scope, err error) {
	corpus, service = r.PathValue("corpus"), r.PathValue("service")
	scope, err = s.catalog.LookupScope(r.Context(), corpus, service)
	if errors.Is(err, queue.ErrNotFound) {
		return "", "", scope, httpError{code: http.StatusNotFound, msg: err.Error()}
	}
	return corpus, service, scope, err
}

func (s *Server) apiStatus(r *http.Request) (any, error) {
	fig, err := s.readOverview(r.Context())
	if err != nil {
		return nil, err
	}
	return api.NewStatus(fig.progress), nil
}

func (s *Server) apiScopeStatus(r *http.Request) (any, error) {
	corpus, service, ids, err := s.apiScope(r)
	if err != nil {
		return nil, err
	}
	fig, err := s.readOverview(r.Context())
	if err != nil {
		return nil, err
	}
	for _, p := range fig.progress {
		if p.CorpusID == ids.CorpusID && p.ServiceID == ids.ServiceID {
			return api.NewScopeStatus(p), nil
		}
	}
	return api.NewScopeStatus(inspect.Progress{Corpus: corpus, Service: service}), nil
}

func (s *Server) apiCorpora(r *http.Request) (any, error) {
	shares, err := s.catalog.Shares(r.Context(), "")
	return api.NewCorpora(shares), err
}

func (s *Server) apiServices(r *http.Request) (any, error) {
	svcs, err := s.catalog.Services(r.Context())
	return api.NewServices(svcs), err
}

func (s *Server) apiSandboxes(r *http.Request) (any, error) {
	sbs, err := s.reports.Sandboxes(r.Context())
	return api.NewSandboxes(sbs), err
}

// reportQuery reads a report rung's query; page: whether it takes limit and offset.
func (s *Server) reportQuery(r *http.Request, page bool) (api.ReportQuery, error) {
	var q api.ReportQuery
	var err error
	if q.Corpus, q.Service, q.Scope, err = s.apiScope(r); err != nil {
		return q, err
	}
	v := r.URL.Query()
	q.Severity, q.Category, q.What, q.Limit = v.Get("severity"), v.Get("category"), v.Get("what"), 100
	if page {
		if q.Limit, q.Offset, err = pageParams(v); err != nil {
			return q, err
		}
	}
	switch a := v.Get("all"); a {
	case "", "0", "false":
	case "1", "true":
		q.All = true
	default:
		return q, api.Paramf("all %q: want 1 (every task, whatever its status) or 0", a)
	}
	return q, q.Check()
}

// rungNeeds checks that a rung got the names it needs.
func rungNeeds(v url.Values, names ...string) error {
	for _, n := range names {
		if v.Get(n) == "" {
			return api.Paramf("%s is required", n)
		}
	}
	return nil
}

func (s *Server) apiReportSeverities(r *http.Request) (any, error) {
	q, err := s.reportQuery(r, false)
	if err != nil {
		return nil, err
	}
	return api.ReadSeverities(r.Context(), s.reports, q)
}

// apiReportNames is the categories rung (…/report/categories) and the whats rung (…/whats).
func (s *Server) apiReportNames(r *http.Request) (any, error) {
	q, err := s.reportQuery(r, true)
	if err != nil {
		return nil, err
	}
	need := []string{"severity"}
	if strings.HasSuffix(r.URL.Path, "/whats") {
		need = append(need, "category")
	} else if q.Category != "" {
		return nil, api.Paramf("category: the categories rung takes none (ask …/report/whats)")
	}
	if err := rungNeeds(r.URL.Query(), need...); err != nil {
		return nil, err
	}
	return api.ReadNames(r.Context(), s.reports, q)
}

// apiReportTasks is the last rung, read within the page deadline as the report's messages page.
func (s *Server) apiReportTasks(r *http.Request) (any, error) {
	q, err := s.reportQuery(r, true)
	if err != nil {
		return nil, err
	}
	if err := rungNeeds(r.URL.Query(), "severity", "category", "what"); err != nil {
		return nil, err
	}
	d := pageDeadline(r)
	ctx, cancel := d.within(r.Context())
	defer cancel()
	out, err := api.ReadTasks(ctx, s.reports, q)
	if d.missed(r.Context(), err) {
		out.Tasks, out.Late, out.NextOffset = []api.ReportTask{}, true, nil
		return out, nil
	}
	return out, err
}

func (s *Server) apiRuns(r *http.Request) (any, error) {
	corpus, service, ids, err := s.apiScope(r)
	if err != nil {
		return nil, err
	}
	runs, err := s.reports.Runs(r.Context(), ids)
	return api.NewRuns(corpus, service, runs), err
}

// apiDiffRuns reads the from and to of a diff.
func (s *Server) apiDiffRuns(r *http.Request) (corpus, service string, d reports.DiffRuns, err error) {
	corpus, service, ids, err := s.apiScope(r)
	if err != nil {
		return "", "", d, err
	}
	runs, err := s.reports.Runs(r.Context(), ids)
	if err != nil {
		return "", "", d, err
	}
	d, err = diffParams(r.URL.Query(), ids, runs)
	return corpus, service, d, err
}

func (s *Server) apiDiff(r *http.Request) (any, error) {
	corpus, service, d, err := s.apiDiffRuns(r)
	if err != nil {
		return nil, err
	}
	cells, swept, err := s.reports.DiffMatrixSwept(r.Context(), d)
	if err != nil || swept == nil {
		return api.NewDiff(corpus, service, d, cells), err
	}
	fold, err := s.reports.ReportFoldState(r.Context())
	return api.NewDiffSwept(corpus, service, d, cells, swept, fold), err
}

// diffStatus reads a diff cell's status by name (new: not a task then, for from_status only).
func diffStatus(name, v string, canBeNew bool) (*queue.Status, error) {
	if v == "new" && canBeNew {
		return nil, nil
	}
	for _, st := range diffStatuses {
		if api.StatusName(st) == v {
			return &st, nil
		}
	}
	want := "no_problem, warning, error, fatal, invalid, todo, in_flight or blocked"
	if canBeNew {
		want += ", or new"
	}
	return nil, api.Paramf("%s %q: want %s", name, v, want)
}

func (s *Server) apiDiffTasks(r *http.Request) (any, error) {
	corpus, service, d, err := s.apiDiffRuns(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	from, err := diffStatus("from_status", q.Get("from_status"), true)
	if err != nil {
		return nil, err
	}
	to, err := diffStatus("to_status", q.Get("to_status"), false)
	if err != nil {
		return nil, err
	}
	limit, offset, err := pageParams(q)
	if err != nil {
		return nil, err
	}
	tasks, err := s.reports.DiffCellTasks(r.Context(), d, from, *to, limit, offset)
	if err != nil {
		return nil, err
	}
	out := api.DiffTasks{Corpus: corpus, Service: service, From: d.From, To: d.To, FromStatus: q.Get("from_status"),
		ToStatus: q.Get("to_status"), Offset: offset, Limit: limit, Tasks: make([]api.DiffTask, 0, len(tasks))}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, api.DiffTask(t))
	}
	if len(tasks) == limit && offset+limit <= reports.ReportMaxOffset {
		n := offset + limit
		out.NextOffset = &n
	}
	return out, nil
}

// durationParam reads an optional duration parameter (a Go duration: 30s, 5m).
func durationParam(q url.Values, name string, def time.Duration) (time.Duration, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > 24*time.Hour {
		return 0, api.Paramf("%s %q: want a duration such as 30s or 5m, up to 24h", name, v)
	}
	return d, nil
}

func (s *Server) apiWhy(r *http.Request) (any, error) {
	corpus, service, ids, err := s.apiScope(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	o := inspect.WhyOptions{Corpus: corpus, Service: service, CorpusID: ids.CorpusID, ServiceID: ids.ServiceID}
	if o.WorkerCap, err = intParam(q, "worker_cap", dispatch.MaxInFlightPerWorkerDefault, 1, 1_000_000); err != nil {
		return nil, err
	}
	if o.ReapInterval, err = durationParam(q, "reap_interval", reaper.IntervalDefault); err != nil {
		return nil, err
	}
	if o.FoldInterval, err = durationParam(q, "fold_interval", reaper.FoldIntervalDefault); err != nil {
		return nil, err
	}
	reasons, err := s.inspect.Why(r.Context(), o)
	return api.NewWhy(corpus, service, reasons), err
}

// Task messages: a page of at most maxTaskMessages (the task page's), within the first
// maxAPIMessages: a task holding a million messages costs a request at most ten task pages.
const maxAPIMessages = 10 * maxTaskMessages

func (s *Server) apiTask(r *http.Request) (any, error) {
	h, err := s.history(r, -1)
	if err != nil {
		return nil, err
	}
	runs, err := s.reports.Runs(r.Context(), queue.Scope{CorpusID: h.CorpusID, ServiceID: h.ServiceID})
	if err != nil {
		return nil, err
	}
	return api.NewTask(h, runs), nil
}

func (s *Server) apiTaskMessages(r *http.Request) (any, error) {
	h, err := s.history(r, -1)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	limit, err := intParam(q, "limit", 100, 1, maxTaskMessages)
	if err != nil {
		return nil, err
	}
	offset, err := intParam(q, "offset", 0, 0, maxAPIMessages-maxTaskMessages)
	if err != nil {
		return nil, err
	}
	out := api.TaskMessages{TaskID: h.ID, Offset: offset, Limit: limit, Messages: []api.TaskMessage{}}
	d := pageDeadline(r)
	ctx, cancel := d.within(r.Context())
	msgs, err := s.inspect.TaskMessages(ctx, h.ID, offset+limit+1)
	cancel()
	if out.Late = d.missed(r.Context(), err); out.Late {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	b := api.NewBudget()
	for i := offset; i < min(len(msgs), offset+limit); i++ {
		m := msgs[i]
		out.Messages = append(out.Messages, api.TaskMessage{Run: m.Run, Severity: string(m.Severity), Category: m.Category,
			What: m.What, Details: b.Clip(m.Details), DetailsBytes: len(m.Details)})
	}
	if len(msgs) > offset+limit && offset+limit <= maxAPIMessages-maxTaskMessages {
		n := offset + limit
		out.NextOffset = &n
	}
	return out, nil
}

func (s *Server) apiSearch(r *http.Request) (any, error) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	out := api.Search{Query: q, Tasks: []api.FoundTask{}}
	add := func(t inspect.FoundTask) {
		out.Tasks = append(out.Tasks, api.FoundTask{ID: t.ID, Corpus: t.Corpus, Service: t.Service, Entry: t.Entry,
			Status: api.StatusName(queue.Status(t.Status)), Run: t.Run, Task: api.TaskPath(t.ID)})
	}
	if id, err := strconv.ParseInt(strings.TrimPrefix(q, "#"), 10, 64); err == nil && id > 0 {
		h, err := s.inspect.TaskHistoryMessages(r.Context(), id, -1)
		if err == nil {
			add(inspect.FoundTask{ID: h.ID, Corpus: h.Corpus, Service: h.Service, Entry: h.Entry, Status: int16(h.Status), Run: h.Run})
			return out, nil
		}
		if !errors.Is(err, queue.ErrNotFound) {
			return nil, err
		}
	}
	if utf8.RuneCountInString(q) < minSearchText {
		return nil, api.Paramf("q %q: give a task id, or at least %d characters of an entry", q, minSearchText)
	}
	found, err := s.inspect.SearchTasks(r.Context(), q, maxSearchRows+1)
	if err != nil {
		return nil, err
	}
	out.More = len(found) > maxSearchRows
	for _, t := range found[:min(len(found), maxSearchRows)] {
		add(t)
	}
	return out, nil
}
