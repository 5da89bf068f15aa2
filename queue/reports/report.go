package reports

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// The report's paging caps (CorTeX's): a page holds at most ReportMaxLimit rows and starts at
// most ReportMaxOffset rows in.
const (
	ReportMaxLimit  = 1000
	ReportMaxOffset = 100000
)

// Slice names one slice of a corpus and service's report: a status, and within it a
// category and a what of the messages of the status's severity; Limit and Offset page the rows.
type Slice struct {
	queue.Scope
	Status   queue.Status
	Severity queue.Severity
	Category string
	What     string
	Limit    int
	Offset   int
}

// check says whether the rollups hold a slice: they count, for a final status, the messages of
// its severity (StatusSeverity).
func (sl Slice) check() error {
	if sev, ok := queue.StatusSeverity(sl.Status); !ok || sev != sl.Severity {
		return fmt.Errorf("report: the tasks of status %d are reported with the messages of their own severity, not %q", sl.Status, sl.Severity)
	}
	return nil
}

// ReportRow is one category or what of a report level: the tasks with a message of it in their
// current run, and those messages.
type ReportRow struct {
	Name     string `json:"name"`
	Tasks    int64  `json:"tasks"`
	Messages int64  `json:"messages"`
}

// ReportMessage is one message of the report's last level, with its task.
type ReportMessage struct {
	TaskID  int64  `json:"task_id"`
	Entry   string `json:"entry"`
	Details string `json:"details"`
	// Status is the task's, in the all-tasks view (ReportAllMessages); nil otherwise.
	Status *queue.Status `json:"status,omitempty"`
}

// ReportStatuses counts the tasks of a corpus and service by status.
func (s *Store) ReportStatuses(ctx context.Context, scope queue.Scope) (map[queue.Status]int64, error) {
	rows, err := dbsqlc.New(s.pool).ReportStatuses(ctx, scope.CorpusID, scope.ServiceID)
	if err != nil {
		return nil, pgtx.Wrap("report", err)
	}
	out := make(map[queue.Status]int64, len(rows))
	for _, r := range rows {
		out[queue.Status(r.Status)] += r.Tasks
	}
	return out, nil
}

// ReportCategories lists a page of the categories of a slice's status, most tasks first, with
// the number of categories in all, as of the last fold (FoldReports): the messages counted are
// those of the status's severity (StatusSeverity). A Fatal task with no fatal message counts
// under queue.NoMessages.
func (s *Store) ReportCategories(ctx context.Context, sl Slice) ([]ReportRow, int64, error) {
	if err := sl.check(); err != nil {
		return nil, 0, err
	}
	rows, err := dbsqlc.New(s.pool).ReportCategories(ctx, dbsqlc.ReportCategoriesParams{
		CorpusID: sl.CorpusID, ServiceID: sl.ServiceID, Status: int16(sl.Status),
		NoMessages: sl.Status == queue.StatusFatal, Lim: int32(sl.Limit), Off: int32(sl.Offset),
	})
	if err != nil {
		return nil, 0, pgtx.Wrap("report categories", err)
	}
	out, total := make([]ReportRow, len(rows)), int64(0)
	for i, r := range rows {
		out[i], total = ReportRow{Name: r.Category, Tasks: r.Tasks, Messages: r.Messages}, r.Total
	}
	return out, total, nil
}

// ReportWhats lists a page of the whats of a slice's category, as ReportCategories does. The
// category queue.NoMessages has one what, queue.NoMessages.
func (s *Store) ReportWhats(ctx context.Context, sl Slice) ([]ReportRow, int64, error) {
	if err := sl.check(); err != nil {
		return nil, 0, err
	}
	if sl.Category == queue.NoMessages && sl.Status == queue.StatusFatal {
		cats, _, err := s.ReportCategories(ctx, Slice{Scope: sl.Scope, Status: sl.Status, Severity: sl.Severity, Limit: ReportMaxLimit})
		if err != nil {
			return nil, 0, err
		}
		for _, c := range cats {
			if c.Name == queue.NoMessages && sl.Offset == 0 {
				return []ReportRow{{Name: queue.NoMessages, Tasks: c.Tasks}}, 1, nil
			} else if c.Name == queue.NoMessages {
				return nil, 1, nil
			}
		}
		return nil, 0, nil
	}
	rows, err := dbsqlc.New(s.pool).ReportWhats(ctx, dbsqlc.ReportWhatsParams{
		CorpusID: sl.CorpusID, ServiceID: sl.ServiceID, Status: int16(sl.Status), Category: sl.Category,
		Lim: int32(sl.Limit), Off: int32(sl.Offset),
	})
	if err != nil {
		return nil, 0, pgtx.Wrap("report whats", err)
	}
	out, total := make([]ReportRow, len(rows)), int64(0)
	for i, r := range rows {
		out[i], total = ReportRow{Name: r.What, Tasks: r.Tasks, Messages: r.Messages}, r.Total
	}
	return out, total, nil
}

// ReportMessages lists a page of the messages of a slice's what with their tasks, by task id;
// for the category queue.NoMessages, the tasks with no message of the severity.
func (s *Store) ReportMessages(ctx context.Context, sl Slice) ([]ReportMessage, error) {
	q := dbsqlc.New(s.pool)
	if sl.Category == queue.NoMessages && sl.Status == queue.StatusFatal {
		if sl.What != queue.NoMessages {
			return nil, nil
		}
		rows, err := q.ReportNoMessages(ctx, dbsqlc.ReportNoMessagesParams{
			CorpusID: sl.CorpusID, ServiceID: sl.ServiceID, Status: int16(sl.Status),
			Severity: string(sl.Severity), Lim: int32(sl.Limit), Off: int32(sl.Offset),
		})
		if err != nil {
			return nil, pgtx.Wrap("report tasks", err)
		}
		out := make([]ReportMessage, len(rows))
		for i, r := range rows {
			out[i] = ReportMessage{TaskID: r.ID, Entry: r.Entry}
		}
		return out, nil
	}
	st := int16(sl.Status)
	rows, err := s.kindMessages(ctx, sl, &st, kindWalkTasks)
	if err != nil {
		return nil, pgtx.Wrap("report tasks", err)
	}
	out := make([]ReportMessage, len(rows))
	for i, r := range rows {
		out[i] = ReportMessage{TaskID: r.ID, Entry: r.Entry, Details: r.Details}
	}
	return out, nil
}

// kindWalkTasks is the number of tasks having a what above which its messages level walks the
// corpus's folded tasks in id order (ReportKindTasksWalk: a page reads about its limit over the
// what's share of the tasks, at most tasks/kindWalkTasks times its limit) rather than finding
// every one of them through the GIN index (ReportKindTasksFew: up to kindWalkTasks, sorted).
const kindWalkTasks = 20_000

// kindMessages reads a page of the messages of sl's what (severity, category, what) in the
// tasks of a status (nil: of any), by task id and position in the task's log. The tasks come
// from the last fold (report_folded: the kinds of each task's log), their messages from the
// logs of the page's tasks only; a task whose status changed since is left out. A what of more
// than walkAbove tasks (kindWalkTasks) is walked to.
func (s *Store) kindMessages(ctx context.Context, sl Slice, status *int16, walkAbove int64) ([]dbsqlc.ReportKindMessagesRow, error) {
	q := dbsqlc.New(s.pool)
	k, err := q.ReportKindTasks(ctx, dbsqlc.ReportKindTasksParams{Severity: string(sl.Severity), Category: sl.Category,
		What: sl.What, Status: status, CorpusID: sl.CorpusID, ServiceID: sl.ServiceID})
	if err != nil || k.Kind == 0 || sl.Limit <= 0 {
		return nil, err
	}
	type task struct {
		id   int64
		n    int32
		upto int64
	}
	var tasks []task
	if k.Tasks > walkAbove {
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			qt := dbsqlc.New(tx)
			if err := qt.ReportKindWalkSettings(ctx); err != nil {
				return err
			}
			rows, err := qt.ReportKindTasksWalk(ctx, dbsqlc.ReportKindTasksWalkParams{Off: int64(sl.Offset), Lim: int32(sl.Limit),
				Kind: k.Kind, CorpusID: sl.CorpusID, ServiceID: sl.ServiceID, Status: status})
			for _, r := range rows {
				tasks = append(tasks, task{r.TaskID, r.N, r.Upto})
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	} else {
		rows, err := q.ReportKindTasksFew(ctx, dbsqlc.ReportKindTasksFewParams{Off: int64(sl.Offset), Lim: int32(sl.Limit),
			Kind: k.Kind, CorpusID: sl.CorpusID, ServiceID: sl.ServiceID, Status: status})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			tasks = append(tasks, task{r.TaskID, r.N, r.Upto})
		}
	}
	// Of each task, the messages of the page: past the offset, up to the limit.
	p := dbsqlc.ReportKindMessagesParams{Kind: k.Kind, Status: status}
	left := int64(sl.Limit)
	for _, t := range tasks {
		if left <= 0 {
			break
		}
		skip := max(int64(sl.Offset)-(t.upto-int64(t.n)), 0)
		take := min(int64(t.n)-skip, left)
		if take <= 0 {
			continue
		}
		p.TaskIds, p.Skips, p.Takes = append(p.TaskIds, t.id), append(p.Skips, int32(skip)), append(p.Takes, int32(take))
		left -= take
	}
	if len(p.TaskIds) == 0 {
		return nil, nil
	}
	return q.ReportKindMessages(ctx, p)
}

// Run is one run of a corpus and service: closed ones with the tallies they ended with, the
// open one (EndedAt nil) with its current tallies.
type Run struct {
	ID        int64      `json:"id"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Note      string     `json:"note"`
	// Owner is who started the run, for a run imported from CorTeX ("" otherwise).
	Owner string `json:"owner,omitempty"`
	Tally
}

// Tally counts tasks by status.
type Tally struct {
	Tasks     int64 `json:"tasks"`
	TODO      int64 `json:"todo"`
	NoProblem int64 `json:"no_problem"`
	Warning   int64 `json:"warning"`
	Error     int64 `json:"error"`
	Fatal     int64 `json:"fatal"`
	Invalid   int64 `json:"invalid"`
	Blocked   int64 `json:"blocked"`
}

// InFlight is the tasks of a tally that are neither TODO, done nor blocked.
func (t Tally) InFlight() int64 {
	return t.Tasks - t.TODO - t.NoProblem - t.Warning - t.Error - t.Fatal - t.Invalid - t.Blocked
}

// Runs lists the runs of a corpus and service, oldest first.
func (s *Store) Runs(ctx context.Context, scope queue.Scope) ([]Run, error) {
	q := dbsqlc.New(s.pool)
	rows, err := q.RunList(ctx, scope.CorpusID, scope.ServiceID)
	if err != nil {
		return nil, pgtx.Wrap("runs", err)
	}
	out := make([]Run, len(rows))
	for i, r := range rows {
		out[i] = Run{ID: r.ID, StartedAt: r.StartedAt, EndedAt: r.EndedAt, Note: r.Note, Owner: r.Owner, Tally: Tally{
			Tasks: r.Tasks, TODO: r.Todo, NoProblem: r.NoProblem, Warning: r.Warning, Error: r.Error,
			Fatal: r.Fatal, Invalid: r.Invalid, Blocked: r.Blocked}}
		if r.EndedAt == nil {
			t, err := q.TaskTally(ctx, scope.CorpusID, scope.ServiceID)
			if err != nil {
				return nil, pgtx.Wrap("runs", err)
			}
			out[i].Tally = Tally{Tasks: t.Tasks, TODO: t.Todo, NoProblem: t.NoProblem, Warning: t.Warning,
				Error: t.Error, Fatal: t.Fatal, Invalid: t.Invalid, Blocked: t.Blocked}
		}
	}
	return out, nil
}

// DiffCell is one cell of a run diff: the tasks whose status was From in the earlier run (nil:
// not a task then) and is To in the later one.
type DiffCell struct {
	From  *queue.Status `json:"-"`
	To    queue.Status  `json:"-"`
	Tasks int64         `json:"tasks"`
}

// DiffRuns are the two runs a diff compares; To is 0 for the current (open) run.
type DiffRuns struct {
	queue.Scope
	From, To int64
}

// DiffMatrix counts the tasks by their status in two runs (DiffMatrixSwept, without when).
func (s *Store) DiffMatrix(ctx context.Context, d DiffRuns) ([]DiffCell, error) {
	cells, _, err := s.DiffMatrixSwept(ctx, d)
	return cells, err
}

// DiffMatrixSwept counts the tasks by their status in two runs. The matrix of two closed runs is
// counted once and kept (run_diffs); that of the last closed run and the current one is kept by
// the report fold (diff_current), as of the last fold, and its todo, in-flight and blocked
// cells as of the last sweep (sweptAt; nil: counted now). Other pairs are counted now.
func (s *Store) DiffMatrixSwept(ctx context.Context, d DiffRuns) (cells []DiffCell, sweptAt *time.Time, err error) {
	q := dbsqlc.New(s.pool)
	add := func(from *int16, to int16, n int64) {
		c := DiffCell{To: queue.Status(to), Tasks: n}
		if from != nil {
			f := queue.Status(*from)
			c.From = &f
		}
		cells = append(cells, c)
	}
	if d.To == 0 {
		kept, err := q.DiffCurrentStored(ctx, d.CorpusID, d.ServiceID, d.From)
		if err != nil {
			return nil, nil, pgtx.Wrap("diff", err)
		}
		for _, r := range kept {
			add(r.FromStatus, r.ToStatus, r.Tasks)
			sweptAt = &r.SweptAt
		}
		if len(kept) > 0 {
			return cells, sweptAt, nil
		}
		rows, err := q.DiffMatrixCurrent(ctx, d.From, d.CorpusID, d.ServiceID)
		if err != nil {
			return nil, nil, pgtx.Wrap("diff", err)
		}
		for _, r := range rows {
			add(r.FromStatus, r.ToStatus, r.Tasks)
		}
		return cells, nil, nil
	}
	kept, err := q.DiffClosedStored(ctx, d.From, d.To)
	if err != nil {
		return nil, nil, pgtx.Wrap("diff", err)
	}
	for _, r := range kept {
		add(r.FromStatus, r.ToStatus, r.Tasks)
	}
	if len(kept) > 0 {
		return cells, nil, nil
	}
	rows, err := q.DiffMatrixClosed(ctx, d.From, d.To)
	if err != nil {
		return nil, nil, pgtx.Wrap("diff", err)
	}
	p := dbsqlc.DiffClosedStoreParams{CorpusID: d.CorpusID, ServiceID: d.ServiceID, FromRun: d.From, ToRun: d.To}
	for _, r := range rows {
		add(r.FromStatus, r.ToStatus, r.Tasks)
		from := int16(-128) // DiffClosedStore's NULL
		if r.FromStatus != nil {
			from = *r.FromStatus
		}
		p.FromStatuses, p.ToStatuses, p.Tasks = append(p.FromStatuses, from), append(p.ToStatuses, r.ToStatus), append(p.Tasks, r.Tasks)
	}
	// Kept for the next call, if this connection may write (an audit role's may not: it
	// counts every time).
	if len(rows) > 0 {
		var pgErr *pgconn.PgError
		if err := q.DiffClosedStore(ctx, p); err != nil && !(errors.As(err, &pgErr) && (pgErr.Code == "42501" || pgErr.Code == "25006")) {
			return nil, nil, pgtx.Wrap("diff", err)
		}
	}
	return cells, nil, nil
}

// DiffTask is one task of a diff cell.
type DiffTask struct {
	TaskID int64  `json:"task_id"`
	Entry  string `json:"entry"`
}

// DiffCellTasks lists a page of the tasks of one diff cell, by id. For the kept matrix of the
// last closed run and the current one (DiffMatrixSwept), a cell whose statuses differ lists its
// tasks as of the last fold that are still in it (a task that entered it since shows after the
// next fold); a cell whose statuses are the same lists its tasks now.
func (s *Store) DiffCellTasks(ctx context.Context, d DiffRuns, from *queue.Status, to queue.Status, limit, offset int) ([]DiffTask, error) {
	q := dbsqlc.New(s.pool)
	var fromStatus *int16
	if from != nil {
		f := int16(*from)
		fromStatus = &f
	}
	var out []DiffTask
	fromKey := int16(-128) // new, as the kept matrices' queries take it
	if from != nil {
		fromKey = int16(*from)
	}
	if d.To == 0 && from != nil && *from == to {
		// The same status in both: walk the closed run's statuses in order.
		rows, err := q.DiffCellSame(ctx, dbsqlc.DiffCellSameParams{FromRun: d.From, Status: int16(to),
			CorpusID: d.CorpusID, ServiceID: d.ServiceID, Lim: int32(limit), Off: int32(offset)})
		if err != nil {
			return nil, pgtx.Wrap("diff tasks", err)
		}
		for _, r := range rows {
			out = append(out, DiffTask{TaskID: r.ID, Entry: r.Entry})
		}
		return out, nil
	}
	if d.To == 0 {
		// A cell of the kept matrix: its tasks that moved are in diff_touched, by cell; an empty
		// cell is not looked for at all.
		kept, err := q.DiffKeptCell(ctx, dbsqlc.DiffKeptCellParams{FromKey: fromKey, ToStatus: int16(to),
			CorpusID: d.CorpusID, ServiceID: d.ServiceID, FromRun: d.From})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, pgtx.Wrap("diff tasks", err)
		}
		if err == nil {
			if kept.Tasks == 0 {
				return nil, nil
			}
			rows, err := q.DiffCellKept(ctx, dbsqlc.DiffCellKeptParams{Gen: kept.Gen, ToStatus: int16(to), FromKey: fromKey,
				Lim: int32(limit), Off: int32(offset)})
			if err != nil {
				return nil, pgtx.Wrap("diff tasks", err)
			}
			for _, r := range rows {
				out = append(out, DiffTask{TaskID: r.ID, Entry: r.Entry})
			}
			return out, nil
		}
	} else {
		// An empty cell of a kept closed pair is not looked for.
		kept, err := q.DiffClosedCell(ctx, fromKey, int16(to), d.From, d.To)
		if err != nil {
			return nil, pgtx.Wrap("diff tasks", err)
		}
		if kept.Kept && kept.Tasks == 0 {
			return nil, nil
		}
	}
	if d.To == 0 {
		rows, err := q.DiffCellCurrent(ctx, dbsqlc.DiffCellCurrentParams{FromRun: d.From, CorpusID: d.CorpusID,
			ServiceID: d.ServiceID, ToStatus: int16(to), FromStatus: fromStatus, Lim: int32(limit), Off: int32(offset)})
		if err != nil {
			return nil, pgtx.Wrap("diff tasks", err)
		}
		for _, r := range rows {
			out = append(out, DiffTask{TaskID: r.ID, Entry: r.Entry})
		}
		return out, nil
	}
	rows, err := q.DiffCellClosed(ctx, dbsqlc.DiffCellClosedParams{FromRun: d.From, ToRun: d.To,
		ToStatus: int16(to), FromStatus: fromStatus, Lim: int32(limit), Off: int32(offset)})
	if err != nil {
		return nil, pgtx.Wrap("diff tasks", err)
	}
	for _, r := range rows {
		out = append(out, DiffTask{TaskID: r.ID, Entry: r.Entry})
	}
	return out, nil
}

// SandboxSummary reports what CreateSandbox did.
type SandboxSummary struct {
	ID    int32
	Tasks int64
}

// CreateSandbox makes a sandbox corpus of the parent of scope (its path, the parent as
// parent_corpus_id) holding, as TODO tasks of a first run, copies of the tasks the scope
// selects (as a rerun would). The copies read the parent's source archives; their results are
// <service>.sandbox-<id>.zip, so nothing of the parent changes. A scope selecting no task
// makes no sandbox: queue.ErrNotFound. The sandbox's fair-share priority for the service is
// priority (cortexq sandbox create gives SandboxPriority unless told otherwise).
func (s *Store) CreateSandbox(ctx context.Context, name string, scope lease.RerunScope, priority int32) (SandboxSummary, error) {
	if err := catalog.CheckShare(nil, &priority); err != nil {
		return SandboxSummary{}, err
	}
	var sum SandboxSummary
	err := s.inTx(ctx, "sandbox create", false, func(q *dbsqlc.Queries, _ pgx.Tx, now time.Time) error {
		id, err := q.SandboxCreate(ctx, name, scope.CorpusID)
		if err != nil {
			return err
		}
		p := dbsqlc.SandboxCopyTasksParams{SandboxID: id, CorpusID: scope.CorpusID, ServiceID: scope.ServiceID,
			NoMessages: scope.NoMessages}
		p.Statuses, p.Severity, p.Category, p.What = scope.Selection()
		n, err := q.SandboxCopyTasks(ctx, p)
		if err != nil {
			return fmt.Errorf("copy tasks: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("the selection holds no task of the corpus and service: %w", queue.ErrNotFound)
		}
		if _, err := q.CorpusShareSet(ctx, scope.ServiceID, id, nil, &priority); err != nil {
			return fmt.Errorf("set priority: %w", err)
		}
		sum = SandboxSummary{ID: id, Tasks: n}
		return q.RunOpen(ctx, id, scope.ServiceID, now, scope.Note)
	})
	return sum, err
}

// Sandbox is one sandbox corpus.
type Sandbox struct {
	ID        int32     `json:"id"`
	Name      string    `json:"name"`
	Parent    string    `json:"parent"`
	CreatedAt time.Time `json:"created_at"`
	Tasks     int64     `json:"tasks"`
}

// Sandboxes lists the sandbox corpora.
func (s *Store) Sandboxes(ctx context.Context) ([]Sandbox, error) {
	rows, err := dbsqlc.New(s.pool).SandboxList(ctx)
	if err != nil {
		return nil, pgtx.Wrap("sandboxes", err)
	}
	out := make([]Sandbox, len(rows))
	for i, r := range rows {
		out[i] = Sandbox(r)
	}
	return out, nil
}

// SandboxDeleted reports what DeleteSandbox did.
type SandboxDeleted struct {
	Tasks    int
	Archives int
}

// DeleteSandbox deletes a sandbox corpus: its tasks (with their dispatch rows, attempts and
// messages), its runs, every row keyed by its id (no orphan: task_totals, shares, report and
// diff rows), and, once that has committed, its result archives
// (<service>.sandbox-<id>.zip beside each task's source). Nothing of the parent is touched: a
// corpus that is no sandbox is queue.ErrNotFound.
func (s *Store) DeleteSandbox(ctx context.Context, name string) (SandboxDeleted, error) {
	var sum SandboxDeleted
	var archives []string
	err := s.inTx(ctx, "sandbox delete", false, func(q *dbsqlc.Queries, _ pgx.Tx, _ time.Time) error {
		archives = archives[:0]
		sb, err := q.SandboxLock(ctx, name)
		if err != nil {
			return err
		}
		gone, err := q.SandboxDeleteTasks(ctx, sb.ID)
		if err != nil {
			return fmt.Errorf("delete tasks: %w", err)
		}
		sum.Tasks = len(gone)
		seen := make(map[string]bool, len(gone))
		ids := make([]int64, len(gone))
		for i, g := range gone {
			ids[i] = g.ID
			dir := filepath.Dir(g.Entry)
			if g.Entry == "" || dir == "." || dir == "/" {
				continue
			}
			p := filepath.Join(dir, fmt.Sprintf("%s.sandbox-%d.zip", g.Service, sb.ArchiveID))
			if !seen[p] {
				seen[p] = true
				archives = append(archives, p)
			}
		}
		if err := q.SandboxDeleteRuns(ctx, sb.ID); err != nil {
			return fmt.Errorf("delete runs: %w", err)
		}
		if err := q.DiffDeleteCorpus(ctx, sb.ID); err != nil {
			return fmt.Errorf("delete diff matrices: %w", err)
		}
		// The rows keyed by the sandbox's id or its tasks', as a corpus deletion removes them:
		// the report fold's notes of the deleted tasks, its task_totals ledger (the deletion's
		// trigger wrote a negative row for each positive one), its shares, its folded report.
		if err := q.LifecycleForgetChanges(ctx, ids); err != nil {
			return fmt.Errorf("forget the report's changes: %w", err)
		}
		if _, err := q.LifecycleDeleteScopeRows(ctx, sb.ID, 0, true, false); err != nil {
			return fmt.Errorf("delete the sandbox's keyed rows: %w", err)
		}
		return q.SandboxDeleteCorpus(ctx, sb.ID)
	})
	if err != nil {
		return SandboxDeleted{}, err
	}
	var errs []error
	for _, p := range archives {
		switch err := os.Remove(p); {
		case err == nil:
			sum.Archives++
		case !errors.Is(err, os.ErrNotExist):
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return sum, fmt.Errorf("sandbox %s deleted, but %d of its result archives remain (first: %w)", name, len(errs), errs[0])
	}
	return sum, nil
}

// TuneReportPool sets what the report, runs and diff queries need on their connections (as
// RuntimeParams, made as lease.TunePool's are: docs/operations.md#poolers):
//
//   - plan_cache_mode force_custom_plan. pgx prepares each statement; after five runs PostgreSQL
//     may keep a generic plan made without the status, severity or runs' values, and the report's
//     rows are skewed (a status of 1% or 35% of the tasks, a what in 12 or 120,000 messages),
//     and a generic plan can be ten times slower (docs/performance.md#report-queries-plans).
//   - work_mem 64MB, so that the count of distinct tasks of a small severity sorts in memory.
//   - jit off: compiling the category level's expressions costs more than it saves
//     (docs/performance.md#report-queries-plans).
func TuneReportPool(cfg *pgxpool.Config) {
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	cfg.ConnConfig.RuntimeParams["work_mem"] = "64MB"
	cfg.ConnConfig.RuntimeParams["jit"] = "off"
}

// CompactTaskTotals sums the task_totals ledger's rows into one per corpus, service and status
// (the triggers on tasks append a row per statement that moves tasks). The report fold calls
// it; it reports how many rows remain.
func (s *Store) CompactTaskTotals(ctx context.Context) (int64, error) {
	n, err := dbsqlc.New(s.pool).TaskTotalsCompact(ctx)
	return n, pgtx.Wrap("compact task totals", err)
}
