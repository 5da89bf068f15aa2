package lease

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// LeaseRequest asks for one task for each of Workers, all of one service.
type LeaseRequest struct {
	ServiceID int32
	// LeaseTimeout is the service's lease; zero takes the store's default.
	LeaseTimeout time.Duration
	// Workers are the requesting workers' identities, one task each at most.
	Workers []string
}

// Lease is a task leased to a worker. The lease is committed when Lease returns: the payload may
// be sent.
type Lease struct {
	TaskID    int64
	Run       int32
	Attempt   int // 0-based, within the run
	Worker    string
	ServiceID int32
	CorpusID  int32
	Entry     string
	LeasedAt  time.Time
	Deadline  time.Time
	// Retry is set for a queued retry of an expired lease.
	Retry bool
	// LastCause is the last retryable cause reported for the task, if any.
	LastCause []queue.Message
}

// Lease leases tasks of one service to the requesting workers: queued retries first, then TODO
// tasks, skipping rows other transactions hold. A worker gets at most one task; workers left
// over get none (the caller sends them a mock reply). A fresh task is never handed to a worker
// that worked an earlier run of it still on record.
//
// Most leases take the fast path, one statement (sql/lease.sql) that commits as it returns;
// whatever it leaves — queued retries, tasks with rows of earlier runs, the end of a backlog —
// goes to the full path, a transaction that decides on the locked rows in Go. Every lease
// returned is committed, even when the full path fails after the fast path leased some.
func (s *Store) Lease(ctx context.Context, req LeaseRequest) ([]Lease, error) {
	if len(req.Workers) == 0 {
		return nil, nil
	}
	timeout := req.LeaseTimeout
	if timeout <= 0 {
		timeout = s.cfg.LeaseTimeout
	}
	fast, err := s.leaseFresh(ctx, req, timeout)
	if err != nil {
		return nil, err
	}
	if len(fast) == len(req.Workers) {
		return fast, nil
	}
	rest := slices.Clone(req.Workers)
	for _, l := range fast {
		i := slices.Index(rest, l.Worker)
		rest = slices.Delete(rest, i, i+1)
	}
	full, err := s.leaseFull(ctx, LeaseRequest{ServiceID: req.ServiceID, LeaseTimeout: timeout, Workers: rest})
	if err != nil && len(fast) > 0 {
		s.logger.Warn("lease: the full path failed after the fast path leased; its workers get no work this time",
			"service_id", req.ServiceID, "workers", len(rest), "error", err)
		return fast, nil
	}
	return append(fast, full...), err
}

// leaseFresh is the fast path: one statement in a transaction of one round trip.
func (s *Store) leaseFresh(ctx context.Context, req LeaseRequest, timeout time.Duration) ([]Lease, error) {
	secs := int32(max(timeout/time.Second, 1))
	params := dbsqlc.LeaseFreshParams{
		TimeoutSeconds: secs, ServiceID: req.ServiceID, AfterID: s.todo.start(req.ServiceID),
		Workers: req.Workers, Now: s.injectedNow(), Replica: s.cfg.Replica,
	}
	var rows []dbsqlc.LeaseFreshRow
	err := s.genericPlan(ctx, func(q *dbsqlc.Queries) (err error) {
		rows, err = q.LeaseFresh(ctx, params)
		return err
	})
	if err != nil {
		return nil, translate("lease", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	leases := make([]Lease, len(rows))
	dispatched := map[string]int64{}
	var last int64
	for i, r := range rows {
		leases[i] = Lease{
			TaskID: r.ID, Run: r.Run, Worker: r.Worker, ServiceID: req.ServiceID,
			CorpusID: r.CorpusID, Entry: r.Entry, LeasedAt: r.LeasedAt, Deadline: r.Deadline,
		}
		dispatched[r.Worker]++
		last = max(last, r.ID)
	}
	s.todo.advance(req.ServiceID, last)
	s.tally.committed(req.ServiceID, dispatched, nil, rows[0].LeasedAt)
	return leases, nil
}

// leaseFull is the full path: the reads and the decisions of the lease rules, in one
// transaction of two round trips.
func (s *Store) leaseFull(ctx context.Context, req LeaseRequest) ([]Lease, error) {
	timeout := req.LeaseTimeout
	var leases []Lease
	var at time.Time
	var queued []dbsqlc.DispatchLockQueuedRow
	var todo []dbsqlc.TaskLockTodoRow
	n := int32(len(req.Workers))
	after := s.todo.start(req.ServiceID)
	// Both reads lock up to one row per worker: TODO tasks a queued retry made unneeded are only
	// locked until the commit, which spares a round trip.
	reads := func(q *dbsqlc.Queries) (err error) {
		if queued, err = q.DispatchLockQueued(ctx, req.ServiceID, n); err != nil {
			return fmt.Errorf("lock queued retries: %w", err)
		}
		if todo, err = q.TaskLockTodo(ctx, req.ServiceID, after, n); err != nil {
			return fmt.Errorf("lock todo tasks: %w", err)
		}
		return nil
	}
	var last int64
	err := s.pipelinedTx(ctx, "lease", txMode{retry: true}, reads, func(now time.Time, q *dbsqlc.Queries) (*writes, error) {
		leases = leases[:0]
		w := newWrites()
		at = now
		workers := slices.Clone(req.Workers)
		if after > 0 && len(queued)+len(todo) < len(workers) {
			// Short above the cursor: TODO tasks below it (returned, rerun, skipped while another
			// transaction held them) come next, so no worker hears "no work" while there is some.
			more, err := q.TaskLockTodo(ctx, req.ServiceID, 0, n)
			if err != nil {
				return nil, fmt.Errorf("lock todo tasks: %w", err)
			}
			for _, t := range more {
				if !slices.ContainsFunc(todo, func(u dbsqlc.TaskLockTodoRow) bool { return u.ID == t.ID }) {
					todo = append(todo, t)
				}
			}
		}

		for _, qr := range queued {
			d := cloneRow(&qr.Dispatch)
			worker := workers[0]
			workers = workers[1:]
			d.AttemptWorkers = append(d.AttemptWorkers, worker)
			d.State, d.Queued, d.Answered = StateInFlight, false, false
			d.LeasedAt = now
			d.Deadline = now.Add(time.Duration(d.Retries+1) * time.Duration(d.LeaseTimeoutSeconds) * time.Second)
			d.ReceivedAt, d.ForgetAt = nil, nil
			d.Replica = s.cfg.Replica
			w.put(d)
			leases = append(leases, s.leaseOf(d, qr.CorpusID, qr.Entry, true))
		}

		for _, t := range todo {
			if len(workers) == 0 {
				break
			}
			i := slices.IndexFunc(workers, func(wk string) bool { return !slices.Contains(t.KeptWorkers, wk) })
			if i < 0 {
				continue // every worker left worked an earlier run of it: another worker will
			}
			worker := workers[i]
			workers = slices.Delete(workers, i, i+1)
			run := t.Run
			if t.KeptMaxRun >= run {
				// A TODO task with a kept row of its own run (set to TODO by hand): open a new run.
				run = t.KeptMaxRun + 1
			}
			d := &dbsqlc.Dispatch{
				TaskID: t.ID, Run: run, State: StateInFlight,
				AttemptWorkers: []string{worker},
				Deadline:       now.Add(timeout), Replica: s.cfg.Replica,
				ServiceID: req.ServiceID, LeaseTimeoutSeconds: int32(max(timeout/time.Second, 1)),
				LeasedAt: now,
			}
			w.put(d)
			w.setTask(t.ID, queue.StatusDispatched, run)
			leases = append(leases, s.leaseOf(d, t.CorpusID, t.Entry, false))
			last = max(last, t.ID)
		}
		if len(leases) == 0 {
			return nil, nil
		}
		for _, l := range leases {
			w.attempts = append(w.attempts, newAttempt{TaskID: l.TaskID, Run: l.Run, Attempt: int32(l.Attempt), Worker: l.Worker})
		}
		return w, nil
	})
	if err != nil {
		return nil, err
	}
	s.todo.advance(req.ServiceID, last)
	dispatched := map[string]int64{}
	for _, l := range leases {
		dispatched[l.Worker]++
	}
	s.tally.committed(req.ServiceID, dispatched, nil, at)
	return leases, nil
}

func (s *Store) leaseOf(d *dbsqlc.Dispatch, corpusID int32, entry string, retry bool) Lease {
	return Lease{
		TaskID: d.TaskID, Run: d.Run, Attempt: currentAttempt(d),
		Worker: d.AttemptWorkers[currentAttempt(d)], ServiceID: d.ServiceID,
		CorpusID: corpusID, Entry: entry, LeasedAt: d.LeasedAt, Deadline: d.Deadline,
		Retry: retry, LastCause: decodeCause(d.LastCause),
	}
}

// Return undoes leases whose worker turned out unroutable before any payload was sent: no
// attempt is counted. A fresh lease puts the task back to TODO; a retry goes back to the queue.
// A lease that has moved on since (claimed, reaped) is left alone. It reports how many were
// returned.
func (s *Store) Return(ctx context.Context, leases []Lease) (int, error) {
	if len(leases) == 0 {
		return 0, nil
	}
	ids := make([]int64, 0, len(leases))
	for _, l := range leases {
		ids = append(ids, l.TaskID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	returned := 0
	defer s.todo.reset() // returned tasks are TODO again, below the cursors
	err := s.inTx(ctx, "return leases", true, func(q *dbsqlc.Queries, tx pgx.Tx, now time.Time) error {
		returned = 0
		tasks, err := q.TaskLockForClaim(ctx, ids)
		if err != nil {
			return fmt.Errorf("lock tasks: %w", err)
		}
		taskRun := map[int64]int32{}
		for _, t := range tasks {
			taskRun[t.ID] = t.Run
		}
		rows, err := q.DispatchLockForTasks(ctx, ids)
		if err != nil {
			return fmt.Errorf("lock dispatch rows: %w", err)
		}
		byKey := map[rowKey]*dbsqlc.Dispatch{}
		for i := range rows {
			byKey[rowKey{rows[i].TaskID, rows[i].Run}] = &rows[i]
		}
		w := newWrites()
		for _, l := range leases {
			d, ok := byKey[rowKey{l.TaskID, l.Run}]
			if !ok || d.State != StateInFlight || currentAttempt(d) != l.Attempt || d.AttemptWorkers[l.Attempt] != l.Worker {
				continue
			}
			returned++
			w.dropAttempt[attemptKey{l.TaskID, l.Run, int32(l.Attempt)}] = true
			if l.Attempt == 0 {
				w.del(d)
				delete(byKey, rowKey{l.TaskID, l.Run}) // gone: a repeat of this lease is not counted again
				w.setTask(l.TaskID, queue.StatusTODO, taskRun[l.TaskID])
				continue
			}
			d.AttemptWorkers = d.AttemptWorkers[:l.Attempt]
			d.State, d.Queued = StateSettling, true
			d.ForgetAt = ptrTime(now.Add(s.cfg.LateResultWindow))
			w.put(d)
		}
		return w.flush(ctx, q, now, s.cfg.Replica)
	})
	return returned, err
}
