package api

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/reports"
)

// The conversions from what the reads return (queue/inspect, queue/reports, queue/catalog) to
// the API's types, shared by the dashboard's API and the CLI's --json.

// StatusName is a status's name in the API, as in reports: in_flight for dispatched.
func StatusName(s queue.Status) string {
	if s == queue.StatusDispatched {
		return "in_flight"
	}
	return s.String()
}

// TaskPath is a task's path in the API.
func TaskPath(id int64) string { return "/api/v1/tasks/" + strconv.FormatInt(id, 10) }

// NewScopeStatus is one corpus and service's progress.
func NewScopeStatus(p inspect.Progress) ScopeStatus {
	return ScopeStatus{Corpus: p.Corpus, Service: p.Service, Tasks: p.Tasks, Todo: p.TODO, Dispatched: p.Dispatched,
		NoProblem: p.NoProblem, Warning: p.Warning, Error: p.Error, Fatal: p.Fatal, Invalid: p.Invalid,
		Blocked: p.Blocked, Done: p.Done(), Reserved: p.Reserved, InFlight: p.InFlight, Settling: p.Settling,
		Queued: p.Queued, DeadLetters: p.DeadLetters, RepliesLastMinute: p.RepliesLastMinute,
		LeasesLastMinute: p.LeasesLastMinute, LeaseShare: p.LeaseShare, Paused: p.Blocked > 0}
}

// NewStatus is every corpus and service's progress.
func NewStatus(progress []inspect.Progress) Status {
	out := Status{Scopes: make([]ScopeStatus, 0, len(progress))}
	for _, p := range progress {
		out.Scopes = append(out.Scopes, NewScopeStatus(p))
	}
	return out
}

// NewCorpora is the fair shares (catalog.Shares).
func NewCorpora(shares []catalog.Share) Corpora {
	out := Corpora{Corpora: make([]CorpusShare, 0, len(shares))}
	for _, s := range shares {
		out.Corpora = append(out.Corpora, CorpusShare{Corpus: s.Corpus, Service: s.Service, Sandbox: s.Sandbox,
			Weight: s.Weight, Priority: s.Priority, Todo: s.TODO, LeasesLastMinute: s.LeasesLastMinute, LeaseShare: s.LeaseShare})
	}
	return out
}

// NewServices is the services (catalog.Services).
func NewServices(services []catalog.Service) Services {
	out := Services{Services: make([]Service, 0, len(services))}
	for _, s := range services {
		out.Services = append(out.Services, Service{ID: s.ID, Name: s.Name, LeaseTimeoutSeconds: s.LeaseTimeout.Seconds()})
	}
	return out
}

// NewSandboxes is the sandboxes (reports.Sandboxes).
func NewSandboxes(sbs []reports.Sandbox) Sandboxes {
	out := Sandboxes{Sandboxes: make([]Sandbox, 0, len(sbs))}
	for _, s := range sbs {
		out.Sandboxes = append(out.Sandboxes, Sandbox(s))
	}
	return out
}

// NewRuns is a corpus and service's runs (reports.Runs).
func NewRuns(corpus, service string, runs []reports.Run) Runs {
	out := Runs{Corpus: corpus, Service: service, Runs: make([]Run, 0, len(runs))}
	for _, r := range runs {
		out.Runs = append(out.Runs, Run{ID: r.ID, StartedAt: r.StartedAt, EndedAt: r.EndedAt, Note: r.Note, Owner: r.Owner,
			Tasks: r.Tasks, Todo: r.TODO, InFlight: r.InFlight(), NoProblem: r.NoProblem, Warning: r.Warning,
			Error: r.Error, Fatal: r.Fatal, Invalid: r.Invalid, Blocked: r.Blocked})
	}
	return out
}

// diffName is a diff cell's status: its report name, new for no task then, blocked for every
// blocked value.
func diffName(s *queue.Status) string {
	switch {
	case s == nil:
		return "new"
	case *s <= queue.StatusBlocked:
		return "blocked"
	}
	return StatusName(*s)
}

// NewDiff is a run diff's matrix (reports.DiffMatrix): its cells with tasks, merged as the
// page shows them.
func NewDiff(corpus, service string, d reports.DiffRuns, cells []reports.DiffCell) Diff {
	out := Diff{Corpus: corpus, Service: service, From: d.From, To: d.To, Cells: []DiffCell{}}
	at := map[[2]string]int{}
	for _, c := range cells {
		to := c.To
		k := [2]string{diffName(c.From), diffName(&to)}
		if i, ok := at[k]; ok {
			out.Cells[i].Tasks += c.Tasks
			continue
		}
		at[k] = len(out.Cells)
		out.Cells = append(out.Cells, DiffCell{From: k[0], To: k[1], Tasks: c.Tasks})
	}
	return out
}

// NewDiffSwept is NewDiff of a kept matrix (reports.DiffMatrixSwept) with how fresh it is.
func NewDiffSwept(corpus, service string, d reports.DiffRuns, cells []reports.DiffCell, swept *time.Time, fold reports.FoldState) Diff {
	out := NewDiff(corpus, service, d, cells)
	if swept != nil {
		out.Fold, out.SweptAt = NewFold(fold), swept
	}
	return out
}

// RunAt is the run (of the runs of a corpus and service, oldest first) open at t: the runs'
// number of what happened then; 0 with no run on record.
func RunAt(runs []reports.Run, t time.Time) int64 {
	for i := len(runs) - 1; i >= 0; i-- {
		if !t.Before(runs[i].StartedAt) || i == 0 {
			return runs[i].ID
		}
	}
	return 0
}

// NewTask is a task (inspect.TaskHistory, its messages aside) with the runs of its corpus and
// service (reports.Runs).
func NewTask(h inspect.TaskHistory, runs []reports.Run) Task {
	id := strconv.FormatInt(h.ID, 10)
	out := Task{ID: h.ID, Corpus: h.Corpus, Service: h.Service, Entry: h.Entry, Status: StatusName(h.Status), Run: h.Run,
		Attempts: []TaskAttempt{}, Dispatch: []TaskDispatch{},
		Links: TaskLinks{Messages: TaskPath(h.ID) + "/messages", Page: "/task/" + id, Source: "/task/" + id + "/source",
			Result: "/task/" + id + "/result", Log: "/task/" + id + "/cortex.log"}}
	if len(runs) > 0 {
		out.CurrentRun = runs[len(runs)-1].ID
	}
	for _, a := range h.Attempts {
		t := TaskAttempt{Run: a.Run, Attempt: a.Attempt, RunID: RunAt(runs, a.LeasedAt), Worker: a.Worker, Replica: a.Replica,
			LeasedAt: a.LeasedAt, AnsweredAt: a.AnsweredAt, Outcome: a.Outcome}
		if a.Status != nil {
			t.Status = StatusName(*a.Status)
		}
		out.Attempts = append(out.Attempts, t)
	}
	for _, d := range h.Rows {
		out.Dispatch = append(out.Dispatch, TaskDispatch{Run: d.Run, State: d.State, Retries: d.Retries, DeadLettered: d.DeadLettered,
			Replica: d.Replica, LeasedAt: d.LeasedAt, Deadline: d.Deadline, ReceivedAt: d.ReceivedAt})
	}
	return out
}

// NewWhy is cortexq why's reasons.
func NewWhy(corpus, service string, reasons []inspect.Reason) Why {
	out := Why{Corpus: corpus, Service: service, Reasons: make([]Reason, 0, len(reasons))}
	for _, r := range reasons {
		out.Reasons = append(out.Reasons, Reason{Cause: string(r.Cause), Evidence: r.Evidence, Fix: r.Fix})
	}
	return out
}

// Budgets of a list's texts (the dashboard's, docs/web.md#hostile-results): each message's
// details at most DetailsMax bytes until the list has given ListMax, then SpentMax each.
const (
	DetailsMax = 2048
	ListMax    = 512 << 10
	SpentMax   = 256
)

// Budget clips the texts of one list within its budget.
type Budget struct{ left int }

// NewBudget is a list's budget.
func NewBudget() *Budget { return &Budget{left: ListMax} }

// Clip returns s cut (at a character's boundary) within the budget.
func (b *Budget) Clip(s string) string {
	n := DetailsMax
	if b.left < n {
		n = SpentMax
	}
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	b.left -= len(s)
	return s
}

// NewFold is how fresh the rollups are.
func NewFold(f reports.FoldState) *Fold {
	return &Fold{FoldedAt: f.FoldedAt, AgeSeconds: f.Age.Round(time.Millisecond).Seconds(), Pending: f.Pending, Standby: f.Standby}
}

// next is the next page's offset, if there may be one within the caps.
func next(offset, limit, got int, count int64) *int {
	n := offset + limit
	if got < limit || (count >= 0 && int64(n) >= count) || n > reports.ReportMaxOffset {
		return nil
	}
	return &n
}
