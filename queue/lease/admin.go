package lease

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// This file holds the operator's transitions and reports, for cmd/cortexq: services, import,
// pause and resume, progress and a task's history. Rerun is in rerun.go.

// PauseSummary reports what a Pause did.
type PauseSummary struct {
	// Blocked tasks were TODO, or freshly reserved, and are blocked (status -6).
	Blocked int
	// Unreserved are the fresh reservations (no attempt yet) taken back from replicas, counted
	// in Blocked: their tasks are blocked, and a hand-out of one not yet attributed finds no row.
	Unreserved int
	// Requeued are the reserved retries taken back from replicas: queued again, they go on.
	Requeued int
}

// Pause blocks the TODO tasks of a scope (status -6), in one transaction: nothing more of it is
// leased, and leased work finishes. Reservations of the scope are taken back from every replica
// first: a fresh one is deleted and its task blocked with the TODO ones, a reserved retry goes
// back to the queue (retries of leased work go on).
func (s *Store) Pause(ctx context.Context, scope Scope) (PauseSummary, error) {
	var sum PauseSummary
	defer s.todo.reset()
	err := s.inTx(ctx, "pause", true, func(q *dbsqlc.Queries, _ pgx.Tx, now time.Time) error {
		sum = PauseSummary{}
		// TODO tasks first: a reservation of one being made now holds the task locked, so this
		// waits for it to commit, and the reservation is then seen (and taken back) below. No
		// reservation of a fresh task of the scope can start after it.
		blocked, err := q.TaskPause(ctx, scope.CorpusID, scope.ServiceID)
		if err != nil {
			return fmt.Errorf("block tasks: %w", err)
		}
		rows, err := q.DispatchLockReservedOfScope(ctx, scope.ServiceID, scope.CorpusID)
		if err != nil {
			return fmt.Errorf("lock reservations: %w", err)
		}
		w := newWrites()
		for i := range rows {
			d := &rows[i].Dispatch
			if len(d.AttemptWorkers) == 0 {
				sum.Unreserved++
			} else {
				sum.Requeued++
			}
			s.release(w, d, rows[i].TaskRun, rows[i].TaskStatus, now)
		}
		if err := w.flush(ctx, q, now, s.cfg.Replica); err != nil {
			return err
		}
		// The fresh reservations taken back are TODO again: blocked too.
		unreserved, err := q.TaskPause(ctx, scope.CorpusID, scope.ServiceID)
		if err != nil {
			return fmt.Errorf("block tasks taken back: %w", err)
		}
		sum.Blocked = int(blocked + unreserved)
		return nil
	})
	return sum, err
}

// Resume puts the blocked tasks of a scope back to TODO. It reports how many.
func (s *Store) Resume(ctx context.Context, scope Scope) (int, error) {
	n, err := dbsqlc.New(s.pool).TaskResume(ctx, scope.CorpusID, scope.ServiceID)
	return int(n), translate("resume", err)
}

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
func (s *Store) Progress(ctx context.Context, corpus, service string) ([]Progress, error) {
	var c, svc *string
	if corpus != "" {
		c = &corpus
	}
	if service != "" {
		svc = &service
	}
	rows, err := dbsqlc.New(s.pool).TaskProgress(ctx, c, svc)
	if err != nil {
		return nil, translate("progress", err)
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
}

// RunMessage is a log message of one run of a task.
type RunMessage struct {
	Run int32
	queue.Message
}

// TaskHistory reads a task, its dispatch rows, attempts and messages in one snapshot. An unknown
// task is queue.ErrNotFound.
func (s *Store) TaskHistory(ctx context.Context, id int64) (TaskHistory, error) {
	return s.TaskHistoryMessages(ctx, id, 0)
}

// TaskHistoryMessages is TaskHistory with at most maxMessages of the task's messages, the
// earliest (0: all). A task can hold a million messages; a page showing it wants the first few.
func (s *Store) TaskHistoryMessages(ctx context.Context, id int64, maxMessages int) (TaskHistory, error) {
	var lim *int32
	if maxMessages > 0 {
		n := int32(min(maxMessages, math.MaxInt32))
		lim = &n
	}
	var h TaskHistory
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
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
				FinishedAttempt: d.FinishedAttempt, FinishedStatus: statusPtr(d.FinishedStatus),
				LeaseTimeout: time.Duration(d.LeaseTimeoutSeconds) * time.Second,
				LeasedAt:     d.LeasedAt, Deadline: d.Deadline, ForgetAt: d.ForgetAt,
				ReceivedAt: d.ReceivedAt, Replica: d.Replica, LastCause: decodeCause(d.LastCause),
			})
		}
		attempts, err := q.AttemptListForTask(ctx, id)
		if err != nil {
			return fmt.Errorf("attempts: %w", err)
		}
		for _, a := range attempts {
			at := Attempt{
				Run: a.Run, Attempt: a.Attempt, Worker: a.Worker, Replica: a.Replica,
				LeasedAt: a.LeasedAt, AnsweredAt: a.AnsweredAt, Status: statusPtr(a.Status),
			}
			if a.Outcome != nil {
				at.Outcome = *a.Outcome
			}
			h.Attempts = append(h.Attempts, at)
		}
		msgs, err := q.MessageListForTask(ctx, id, lim)
		if err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		for _, m := range msgs {
			h.Messages = append(h.Messages, RunMessage{Run: m.Run, Message: queue.Message{
				Severity: queue.Severity(m.Severity), Category: m.Category, What: m.What, Details: m.Details,
			}})
		}
		return nil
	})
	if err != nil {
		return TaskHistory{}, translate(fmt.Sprintf("task %d", id), err)
	}
	return h, nil
}

func statusPtr(st *int16) *queue.Status {
	if st == nil {
		return nil
	}
	s := queue.Status(*st)
	return &s
}
