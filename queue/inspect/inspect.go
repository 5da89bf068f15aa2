package inspect

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/dbconv"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Progress is the state of one corpus and service.
type Progress struct {
	Corpus    string
	Service   string
	CorpusID  int32
	ServiceID int32
	// Tasks by status.
	Tasks, TODO, Dispatched                            int64
	NoProblem, Warning, Error, Fatal, Invalid, Blocked int64
	// Dispatch rows: tasks reserved by a replica (not yet handed to a worker, or handed and the
	// worker not yet recorded), leases out, rows held for late results, retries waiting for a
	// worker.
	Reserved, InFlight, Settling, Queued int64
	// DeadLetters are tasks whose current run gave up and still stand as a stand-in Fatal.
	DeadLetters int64
	// RepliesLastMinute counts the attempts answered over the last minute.
	RepliesLastMinute int64
	// LeasesLastMinute counts the attempts leased over the last minute, and LeaseShare is their
	// part of all of the service's (0 to 1): the corpus's fair share as served.
	LeasesLastMinute int64
	LeaseShare       float64
}

// Done counts the tasks with a final status.
func (p Progress) Done() int64 { return p.NoProblem + p.Warning + p.Error + p.Fatal + p.Invalid }

// Finished reports whether nothing of the scope is left to lease or waiting for a worker.
func (p Progress) Finished() bool { return p.TODO == 0 && p.Dispatched == 0 }

// Progress tallies every corpus and service with tasks, or only those named (empty: any).
func (r *Reader) Progress(ctx context.Context, corpus, service string) ([]Progress, error) {
	var c, svc *string
	if corpus != "" {
		c = &corpus
	}
	if service != "" {
		svc = &service
	}
	rows, err := dbsqlc.New(r.pool).TaskProgress(ctx, c, svc)
	if err != nil {
		return nil, pgtx.Wrap("progress", err)
	}
	out := make([]Progress, len(rows))
	for i, r := range rows {
		out[i] = Progress{
			Corpus: r.Corpus, Service: r.Service, CorpusID: r.CorpusID, ServiceID: r.ServiceID,
			Tasks: r.Tasks, TODO: r.Todo, Dispatched: r.Dispatched,
			NoProblem: r.NoProblem, Warning: r.Warning, Error: r.Error, Fatal: r.Fatal,
			Invalid: r.Invalid, Blocked: r.Blocked,
			Reserved: r.Reserved, InFlight: r.InFlight, Settling: r.Settling, Queued: r.Queued,
			DeadLetters: r.DeadLetters, RepliesLastMinute: r.RepliesLastMinute,
			LeasesLastMinute: r.LeasesLastMinute, LeaseShare: r.LeaseShareLastMinute,
		}
	}
	return out, nil
}

// TotalsProgress is Progress for every corpus and service, with the tasks by status read from
// the task_totals ledger (migrations/00013_dashboard_speed.sql) instead of counted, and without
// the figures of the attempts trail (DeadLetters, RepliesLastMinute, LeasesLastMinute,
// LeaseShare: Activity gives them). A millisecond where counting a million tasks takes a tenth of
// a second; the dashboard's overview reads it.
func (r *Reader) TotalsProgress(ctx context.Context) ([]Progress, error) {
	rows, err := dbsqlc.New(r.pool).TotalsProgress(ctx)
	if err != nil {
		return nil, pgtx.Wrap("progress from totals", err)
	}
	out := make([]Progress, len(rows))
	for i, r := range rows {
		out[i] = Progress{
			Corpus: r.Corpus, Service: r.Service, CorpusID: r.CorpusID, ServiceID: r.ServiceID,
			Tasks: r.Tasks, TODO: r.Todo, Dispatched: r.Dispatched,
			NoProblem: r.NoProblem, Warning: r.Warning, Error: r.Error, Fatal: r.Fatal,
			Invalid: r.Invalid, Blocked: r.Blocked,
			Reserved: r.Reserved, InFlight: r.InFlight, Settling: r.Settling, Queued: r.Queued,
		}
	}
	return out, nil
}

// Activity is the part of Progress read from the attempts trail.
type Activity struct {
	DeadLetters, RepliesLastMinute, LeasesLastMinute int64
	LeaseShare                                       float64
}

// Activity reads, per corpus and service, what TotalsProgress leaves out: dead letters and the
// last minute's replies and leases. It reads the attempts trail (a second on millions of attempts).
func (r *Reader) Activity(ctx context.Context) (map[queue.Scope]Activity, error) {
	rows, err := dbsqlc.New(r.pool).TotalsActivity(ctx)
	if err != nil {
		return nil, pgtx.Wrap("activity", err)
	}
	out := make(map[queue.Scope]Activity, len(rows))
	for _, a := range rows {
		out[queue.Scope{CorpusID: a.CorpusID, ServiceID: a.ServiceID}] = Activity{DeadLetters: a.DeadLetters,
			RepliesLastMinute: a.RepliesLastMinute, LeasesLastMinute: a.LeasesLastMinute, LeaseShare: a.LeaseShareLastMinute}
	}
	return out, nil
}

// TaskHistory is everything on record about one task.
type TaskHistory struct {
	ID        int64
	Corpus    string
	CorpusID  int32
	Service   string
	ServiceID int32
	Entry     string
	Status    queue.Status
	Run       int32
	// Rows are the task's dispatch rows, oldest run first.
	Rows []DispatchRow
	// Attempts are its dispatch attempts, by run and attempt.
	Attempts []Attempt
	// Messages are its log messages, by run.
	Messages []RunMessage
}

// DispatchRow is a dispatch row as operators see it.
type DispatchRow struct {
	Run          int32
	State        string
	Workers      []string // the worker of each attempt of the run
	Retries      int32
	Queued       bool
	Answered     bool
	DeadLettered bool
	// FinishedAttempt and FinishedStatus are the result that stands, if any.
	FinishedAttempt *int32
	FinishedStatus  *queue.Status
	LeaseTimeout    time.Duration
	LeasedAt        time.Time
	Deadline        time.Time
	ForgetAt        *time.Time
	ReceivedAt      *time.Time
	Replica         string
	LastCause       []queue.Message
}

// Attempt is one dispatch attempt from the attempts trail.
type Attempt struct {
	Run        int32
	Attempt    int32
	Worker     string
	Replica    string
	LeasedAt   time.Time
	AnsweredAt *time.Time
	Outcome    string // empty while the attempt runs
	Status     *queue.Status
	// Stages are its stage times (docs/stages.md), nil when none were recorded.
	Stages *queue.Stages
}

// RunMessage is a log message of one run of a task.
type RunMessage struct {
	Run int32
	queue.Message
}

// TaskHistory reads a task, its dispatch rows, attempts and messages in one snapshot. An unknown
// task is queue.ErrNotFound.
func (r *Reader) TaskHistory(ctx context.Context, id int64) (TaskHistory, error) {
	return r.TaskHistoryMessages(ctx, id, 0)
}

// TaskHistoryMessages is TaskHistory with at most maxMessages of the task's messages, the
// earliest (0: all; below 0: none). A task can hold a million messages; a page showing it wants
// the first few, and its other pages (the log, the downloads) none.
func (r *Reader) TaskHistoryMessages(ctx context.Context, id int64, maxMessages int) (TaskHistory, error) {
	var lim *int32
	if maxMessages > 0 {
		n := int32(min(maxMessages, math.MaxInt32))
		lim = &n
	}
	var h TaskHistory
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, r.pool, opts, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		t, err := q.TaskDetail(ctx, id)
		if err != nil {
			return err
		}
		h = TaskHistory{
			ID: t.ID, Corpus: t.Corpus, CorpusID: t.CorpusID, Service: t.Service, ServiceID: t.ServiceID,
			Entry: t.Entry, Status: queue.Status(t.Status), Run: t.Run,
		}
		rows, err := q.DispatchListForTask(ctx, id)
		if err != nil {
			return fmt.Errorf("dispatch rows: %w", err)
		}
		for _, d := range rows {
			h.Rows = append(h.Rows, DispatchRow{
				Run: d.Run, State: d.State, Workers: d.AttemptWorkers, Retries: d.Retries,
				Queued: d.Queued, Answered: d.Answered, DeadLettered: d.DeadLettered,
				FinishedAttempt: d.FinishedAttempt, FinishedStatus: dbconv.StatusPtr(d.FinishedStatus),
				LeaseTimeout: time.Duration(d.LeaseTimeoutSeconds) * time.Second,
				LeasedAt:     d.LeasedAt, Deadline: d.Deadline, ForgetAt: d.ForgetAt,
				ReceivedAt: d.ReceivedAt, Replica: d.Replica, LastCause: dbconv.Messages(d.LastCause),
			})
		}
		attempts, err := q.AttemptListForTask(ctx, id)
		if err != nil {
			return fmt.Errorf("attempts: %w", err)
		}
		for _, a := range attempts {
			at := Attempt{
				Run: a.Run, Attempt: a.Attempt, Worker: a.Worker, Replica: a.Replica,
				LeasedAt: a.LeasedAt, AnsweredAt: a.AnsweredAt, Status: dbconv.StatusPtr(a.Status),
			}
			if a.Outcome != nil {
				at.Outcome = *a.Outcome
			}
			if st, err := queue.DecodeStages(a.Stages); err == nil && st.Any() {
				at.Stages = &st
			}
			h.Attempts = append(h.Attempts, at)
		}
		if maxMessages < 0 {
			return nil
		}
		h.Messages, err = taskMessages(ctx, q, id, lim)
		return err
	})
	if err != nil {
		return TaskHistory{}, pgtx.Wrap(fmt.Sprintf("task %d", id), err)
	}
	return h, nil
}

// TaskMessages reads the first maxMessages messages of a task (at least one), as
// TaskHistoryMessages does but on their own: the web dashboard reads them within a deadline
// (docs/web.md#hostile-results).
func (r *Reader) TaskMessages(ctx context.Context, id int64, maxMessages int) ([]RunMessage, error) {
	n := int32(min(max(maxMessages, 1), math.MaxInt32))
	msgs, err := taskMessages(ctx, dbsqlc.New(r.pool), id, &n)
	return msgs, pgtx.Wrap(fmt.Sprintf("task %d", id), err)
}

func taskMessages(ctx context.Context, q *dbsqlc.Queries, id int64, lim *int32) ([]RunMessage, error) {
	msgs, err := q.MessageListForTask(ctx, lim, id)
	if err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	var out []RunMessage
	for _, m := range msgs {
		out = append(out, RunMessage{Run: m.Run, Message: queue.Message{
			Severity: queue.Severity(m.Severity), Category: m.Category, What: m.What, Details: m.Details,
		}})
	}
	return out, nil
}

// DispatchCounts counts dispatch rows of all replicas by state.
type DispatchCounts struct {
	Reserved, InFlight, Settling, Queued, DeadLettered int64
}

// DispatchCounts reads the dispatch table's counts.
func (r *Reader) DispatchCounts(ctx context.Context) (DispatchCounts, error) {
	c, err := dbsqlc.New(r.pool).DispatchCounts(ctx)
	if err != nil {
		return DispatchCounts{}, pgtx.Wrap("count dispatch rows", err)
	}
	return DispatchCounts{Reserved: c.Reserved, InFlight: c.InFlight, Settling: c.Settling, Queued: c.Queued, DeadLettered: c.DeadLettered}, nil
}

// Latency reports the median and 99th percentile of the time from lease to recorded result of
// a corpus's accepted results.
func (r *Reader) Latency(ctx context.Context, corpusID int32) (p50, p99 time.Duration, err error) {
	l, err := dbsqlc.New(r.pool).AttemptLatency(ctx, corpusID)
	if err != nil {
		return 0, 0, pgtx.Wrap("latency", err)
	}
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	return sec(l.P50), sec(l.P99), nil
}

// LastReapAge reports how long ago, by the database clock (or the reader's test clock), any
// replica recorded a reaper pass; ok is false when none ever did.
func (r *Reader) LastReapAge(ctx context.Context) (age time.Duration, ok bool, err error) {
	q := dbsqlc.New(r.pool)
	now, err := q.ClockNow(ctx, r.injectedNow())
	if err != nil {
		return 0, false, pgtx.Wrap("read the clock", err)
	}
	last, err := q.ReaperLastPass(ctx)
	if err != nil {
		return 0, false, pgtx.Wrap("last reaper pass", err)
	}
	if last.Passes == 0 {
		return 0, false, nil
	}
	return now.Sub(last.At), true, nil
}
