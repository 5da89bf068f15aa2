package lease

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/dbconv"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Reservations (docs/semantics.md#reserve, hand-out, attribute). A replica reserves tasks ahead of
// demand, a batch per transaction (Reserve); hands them to requesting workers from memory,
// recording the worker in its hot mirror before the first payload byte; and makes each
// hand-out's worker durable in batched writes (Attribute), which start the lease clock. What a
// replica reserved and did not hand out goes back when it stops or asks (Release), and the
// reaper takes back reservations past their deadline (ReleaseExpired).

// ReservationTTLDefault is how long a reservation holds a task for its replica.
const ReservationTTLDefault = 30 * time.Second

// ReserveRequest asks for up to Max tasks of one service.
type ReserveRequest struct {
	ServiceID int32
	// LeaseTimeout is the service's lease; zero takes the store's default. It is captured in
	// the row at its first reservation and decides the deadline of every attempt.
	LeaseTimeout time.Duration
	Max          int
}

// Reserved is a task reserved by this store's replica, not yet handed out.
type Reserved struct {
	queue.Task
	// Attempt is the 0-based attempt a hand-out starts: the row's count of earlier attempts.
	Attempt int
	// Retry is set for a queued retry of an expired lease; LastCause is its last retryable
	// cause, if any.
	Retry     bool
	LastCause []queue.Message
	// Exclude are workers that worked an earlier run of the task still on record: the task must
	// not go to them.
	Exclude []string
	// Until is the reservation's deadline (database clock): the reaper may take the task back
	// then.
	Until time.Time
}

// For reports whether the task may be handed to worker.
func (r *Reserved) For(worker string) bool { return !slices.Contains(r.Exclude, worker) }

// HandOut is a reserved task given to a worker, to be attributed.
type HandOut struct {
	TaskID    int64
	Run       int32
	Attempt   int
	Worker    string
	ServiceID int32
	// At is when the task was sent, by the replica's monotonic clock: its attribution dates the
	// lease that long before the database clock of its write.
	At time.Time
}

// HandOut gives r to worker.
func (r *Reserved) HandOut(worker string) HandOut {
	return HandOut{TaskID: r.TaskID, Run: r.Run, Attempt: r.Attempt, Worker: worker, ServiceID: r.ServiceID, At: time.Now()}
}

// Lease is the lease a hand-out of r to worker starts, as the dispatch side sends it. Its
// LeasedAt and Deadline are known once attributed.
func (r *Reserved) Lease(worker string) Lease {
	return Lease{Task: r.Task, Attempt: r.Attempt, Worker: worker, Retry: r.Retry, LastCause: r.LastCause}
}

// Reserve reserves up to req.Max tasks of a service for this store's replica, in one
// transaction that has committed when it returns: queued retries first, then TODO tasks,
// skipping rows other transactions hold. A TODO task with a kept row of its current run (set to
// TODO by hand) opens a new run.
//
// Most reservations take the fast path, one statement that commits as it returns (sql/lease.sql
// ReserveFresh); whatever it leaves — queued retries, tasks with rows of earlier runs, the end
// of a backlog — goes to the full path, a transaction that decides on the locked rows in Go.
// Every reservation returned is committed, even when the full path fails after the fast path
// reserved some.
func (s *Store) Reserve(ctx context.Context, req ReserveRequest) ([]Reserved, error) {
	if req.Max <= 0 {
		return nil, nil
	}
	timeout := req.LeaseTimeout
	if timeout <= 0 {
		timeout = s.cfg.LeaseTimeout
	}
	fast, err := s.reserveFresh(ctx, req, timeout)
	if err != nil || len(fast) == req.Max {
		return fast, err
	}
	full, err := s.reserveFull(ctx, ReserveRequest{ServiceID: req.ServiceID, Max: req.Max - len(fast)}, timeout)
	if err != nil && len(fast) > 0 {
		s.logger.Warn("reserve: the full path failed after the fast path reserved some", "service_id", req.ServiceID, "error", err)
		return fast, nil
	}
	return append(fast, full...), err
}

// reserveFresh is the fast path: one statement in a transaction of one round trip.
func (s *Store) reserveFresh(ctx context.Context, req ReserveRequest, timeout time.Duration) ([]Reserved, error) {
	st := s.todo.start(req.ServiceID, false)
	params := dbsqlc.ReserveFreshParams{
		TtlSeconds: s.cfg.ReservationTTL.Seconds(), ServiceID: req.ServiceID,
		CorpusIds: st.corpora, Passes: st.passes, AfterIds: st.after, Vtime: st.vtime,
		MaxRows: int32(req.Max), Now: s.injectedNow(), Replica: s.cfg.Replica,
		TimeoutSeconds: leaseSeconds(timeout),
	}
	var rows []dbsqlc.ReserveFreshRow
	err := s.genericPlan(ctx, func(q *dbsqlc.Queries) (err error) {
		rows, err = q.ReserveFresh(ctx, params)
		return err
	})
	if err != nil {
		return nil, translate("reserve", err)
	}
	out := make([]Reserved, len(rows))
	for i, r := range rows {
		out[i] = Reserved{Task: queue.Task{TaskID: r.ID, Run: r.Run, ServiceID: req.ServiceID, CorpusID: r.CorpusID, Entry: r.Entry}, Until: r.Until}
		s.todo.advance(req.ServiceID, r.CorpusID, r.ID, r.ShareKey)
	}
	return out, nil
}

// lockTodo takes up to n TODO tasks of a service for the full path, by fair share: the highest
// priority first, then (when that runs short) the next lower ones, in the transaction of q.
// With fromLowest it scans every corpus from its lowest id. The tasks are returned in the order
// they are to be handed out; their corpora's passes are recorded once the transaction commits
// (served).
func (s *Store) lockTodo(ctx context.Context, q *dbsqlc.Queries, service int32, n int, fromLowest bool, have []dbsqlc.TaskLockTodoRow) ([]dbsqlc.TaskLockTodoRow, error) {
	st := s.todo.start(service, fromLowest)
	maxPriority := int32(math.MaxInt32)
	for len(have) < n {
		rows, err := q.TaskLockTodo(ctx, dbsqlc.TaskLockTodoParams{
			MaxRows: int32(n - len(have)), CorpusIds: st.corpora, Passes: st.passes, AfterIds: st.after,
			Vtime: st.vtime, ServiceID: service, MaxPriority: maxPriority,
		})
		if err != nil {
			return have, fmt.Errorf("lock todo tasks: %w", err)
		}
		if len(rows) == 0 {
			break
		}
		for _, t := range rows {
			if !slices.ContainsFunc(have, func(u dbsqlc.TaskLockTodoRow) bool { return u.ID == t.ID }) {
				have = append(have, t)
			}
		}
		if rows[0].Priority == math.MinInt32 {
			break
		}
		maxPriority = rows[0].Priority - 1
	}
	return have, nil
}

// reserveFull is the full path: the reads and the decisions of the reservation rules, in one
// transaction of two round trips or more (one more per priority a short read goes on to).
func (s *Store) reserveFull(ctx context.Context, req ReserveRequest, timeout time.Duration) ([]Reserved, error) {
	var out []Reserved
	var queued []dbsqlc.DispatchLockQueuedRow
	var todo []dbsqlc.TaskLockTodoRow
	n := int32(req.Max)
	read := func(ctx context.Context, q *dbsqlc.Queries) ([]dbsqlc.DispatchLockQueuedRow, error) {
		rows, err := q.DispatchLockQueued(ctx, req.ServiceID, n)
		if err != nil {
			return nil, fmt.Errorf("lock queued retries: %w", err)
		}
		return rows, nil
	}
	err := pipelinedTx(ctx, s, "reserve", txMode{retry: true, generic: true}, read, func(now time.Time, got []dbsqlc.DispatchLockQueuedRow, q *dbsqlc.Queries) (*writes, error) {
		out, todo, queued = out[:0], nil, got
		w := newWrites()
		until := now.Add(s.cfg.ReservationTTL)
		var err error
		if want := req.Max - len(queued); want > 0 {
			if todo, err = s.lockTodo(ctx, q, req.ServiceID, want, false, nil); err != nil {
				return nil, err
			}
			if len(todo) < want {
				// Short above the cursors: TODO tasks below them (returned, rerun, skipped while
				// another transaction held them) come next.
				if todo, err = s.lockTodo(ctx, q, req.ServiceID, want, true, todo); err != nil {
					return nil, err
				}
			}
		}
		for _, qr := range queued {
			d := cloneRow(&qr.Dispatch)
			d.State, d.Queued, d.Answered, d.ReceivedAt, d.ForgetAt = StateReserved, false, false, nil, nil
			d.LeasedAt, d.Deadline, d.Replica = now, until, s.cfg.Replica
			w.put(d)
			out = append(out, Reserved{Task: queue.Task{TaskID: d.TaskID, Run: d.Run, ServiceID: d.ServiceID, CorpusID: qr.CorpusID,
				Entry: qr.Entry}, Attempt: len(d.AttemptWorkers), Retry: true, LastCause: dbconv.Messages(d.LastCause), Until: until})
		}
		for _, t := range todo {
			if len(out) >= req.Max {
				break
			}
			run := t.Run
			if t.KeptMaxRun >= run {
				run = t.KeptMaxRun + 1
			}
			d := &dbsqlc.Dispatch{
				TaskID: t.ID, Run: run, State: StateReserved, AttemptWorkers: []string{},
				Deadline: until, Replica: s.cfg.Replica, ServiceID: req.ServiceID,
				LeaseTimeoutSeconds: leaseSeconds(timeout), LeasedAt: now,
			}
			w.put(d)
			w.setTask(t.ID, queue.StatusDispatched, run)
			out = append(out, Reserved{Task: queue.Task{TaskID: t.ID, Run: run, ServiceID: req.ServiceID, CorpusID: t.CorpusID,
				Entry: t.Entry}, Exclude: slices.Compact(slices.Sorted(slices.Values(t.KeptWorkers))), Until: until})
		}
		if len(out) == 0 {
			return nil, nil
		}
		return w, nil
	})
	if err != nil {
		return nil, err
	}
	// The TODO tasks reserved are the first of todo, after the queued retries.
	for _, t := range todo[:len(out)-min(len(queued), len(out))] {
		s.todo.advance(req.ServiceID, t.CorpusID, t.ID, t.ShareKey)
	}
	return out, nil
}

// Attribute makes hand-outs durable, in one statement: each reserved row goes in flight to its
// worker, the lease clock starting now (database clock), with its attempts row. It returns the
// leases it recorded; a hand-out whose reservation has moved on (a claim attributed it first,
// or it was taken back) is left out.
func (s *Store) Attribute(ctx context.Context, hs []HandOut) ([]Lease, error) {
	if len(hs) == 0 {
		return nil, nil
	}
	p := dbsqlc.AttributeParams{Now: s.injectedNow(), Replica: s.cfg.Replica}
	service := map[rowKey]int32{}
	for _, h := range hs {
		p.TaskIds, p.Runs = append(p.TaskIds, h.TaskID), append(p.Runs, h.Run)
		p.Attempts, p.Workers = append(p.Attempts, int32(h.Attempt)), append(p.Workers, h.Worker)
		age := int64(0)
		if !h.At.IsZero() {
			age = time.Since(h.At).Microseconds()
		}
		p.AgesUs = append(p.AgesUs, age)
		service[rowKey{h.TaskID, h.Run}] = h.ServiceID
	}
	var rows []dbsqlc.AttributeRow
	// The attribution commits without waiting for its WAL flush (asyncCommit): a database crash
	// loses at most its last moments, whose rows stay reserved, the crash window a dying replica
	// leaves anyway. See docs/performance.md#asynchronous-commit-of-attributions.
	err := s.retrying("attribute", true, func() error {
		return s.genericPlanWith(ctx, asyncCommit, func(q *dbsqlc.Queries) (err error) {
			rows, err = q.Attribute(ctx, p)
			return err
		})
	})
	if err != nil {
		return nil, translate("attribute", err)
	}
	leases := make([]Lease, len(rows))
	dispatched := map[int32]map[string]int64{}
	for i, r := range rows {
		svc := service[rowKey{r.TaskID, r.Run}]
		leases[i] = Lease{Task: queue.Task{TaskID: r.TaskID, Run: r.Run, ServiceID: svc}, Attempt: int(r.Attempt), Worker: r.Worker,
			LeasedAt: r.LeasedAt, Deadline: r.Deadline}
		if dispatched[svc] == nil {
			dispatched[svc] = map[string]int64{}
		}
		dispatched[svc][r.Worker]++
	}
	for svc, m := range dispatched {
		s.tally.committed(svc, m, nil, rows[0].LeasedAt)
	}
	return leases, nil
}

// Release gives back reservations of this replica that were not handed out: a fresh one puts
// its task back to TODO, a reserved retry goes back to the queue; no attempt is counted. A
// reservation that has moved on is left alone. It reports how many were released.
func (s *Store) Release(ctx context.Context, rs []Reserved) (int, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	want := map[rowKey]bool{}
	ids := make([]int64, 0, len(rs))
	for _, r := range rs {
		want[rowKey{r.TaskID, r.Run}] = true
		ids = append(ids, r.TaskID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	released := 0
	defer s.todo.reset() // released tasks are TODO again, below the cursors
	err := pipelinedTx(ctx, s, "release reservations", txMode{retry: true}, lockTasks(ids), func(now time.Time, got lockedTasks, _ *dbsqlc.Queries) (*writes, error) {
		released = 0
		byID := make(map[int64]*dbsqlc.TaskLockForClaimRow, len(got.tasks))
		for i := range got.tasks {
			byID[got.tasks[i].ID] = &got.tasks[i]
		}
		w := newWrites()
		for i := range got.rows {
			d := &got.rows[i]
			t := byID[d.TaskID]
			if t == nil || !want[rowKey{d.TaskID, d.Run}] || d.State != StateReserved || d.Replica != s.cfg.Replica {
				continue
			}
			s.release(w, d, t.Run, t.Status, now)
			released++
		}
		if released == 0 {
			return nil, nil
		}
		return w, nil
	})
	return released, err
}

// ReleaseExpired gives back reservations of any replica past their deadline (Release), at most
// max (ReapBatchDefault when max <= 0): their replica died or froze holding them. Rows other
// transactions hold are skipped.
func (s *Store) ReleaseExpired(ctx context.Context, max int) (int, error) {
	return s.releaseLocked(ctx, "release expired reservations", func(q *dbsqlc.Queries, now time.Time, max int32) ([]releasable, error) {
		rows, err := q.DispatchLockReservedExpired(ctx, now, max)
		out := make([]releasable, len(rows))
		for i := range rows {
			out[i] = releasable{&rows[i].Dispatch, rows[i].TaskRun, rows[i].TaskStatus}
		}
		return out, err
	}, max)
}

// ReleaseEarlier gives back, at once, every reservation this replica's name holds (Release):
// called at the start, while the name is held (HoldName) and before this process reserves
// anything, they are those of an earlier process of the name, which died holding them. Without
// it they would wait out their deadline (--reservation-ttl). It reports how many it released.
func (s *Store) ReleaseEarlier(ctx context.Context) (int, error) {
	total := 0
	for range 1000 { // bounded: a stock is a few thousand reservations at most
		n, err := s.releaseLocked(ctx, "release an earlier process's reservations", func(q *dbsqlc.Queries, _ time.Time, max int32) ([]releasable, error) {
			rows, err := q.DispatchLockReservedOfReplica(ctx, s.cfg.Replica, max)
			out := make([]releasable, len(rows))
			for i := range rows {
				out[i] = releasable{&rows[i].Dispatch, rows[i].TaskRun, rows[i].TaskStatus}
			}
			return out, err
		}, 0)
		total += n
		if err != nil || n < ReapBatchDefault {
			return total, err
		}
	}
	return total, nil
}

// releasable is a locked reservation with its task's run and status.
type releasable struct {
	d          *dbsqlc.Dispatch
	taskRun    int32
	taskStatus int16
}

// releaseLocked releases, in one transaction, up to max (ReapBatchDefault when max <= 0)
// reservations that lock chooses and locks.
func (s *Store) releaseLocked(ctx context.Context, what string, lock func(*dbsqlc.Queries, time.Time, int32) ([]releasable, error), max int) (int, error) {
	if max <= 0 {
		max = ReapBatchDefault
	}
	n := 0
	err := s.inTx(ctx, what, true, func(q *dbsqlc.Queries, _ pgx.Tx, now time.Time) error {
		n = 0
		rows, err := lock(q, now, int32(max))
		if err != nil {
			return fmt.Errorf("lock the reservations: %w", err)
		}
		w := newWrites()
		for _, r := range rows {
			s.release(w, r.d, r.taskRun, r.taskStatus, now)
		}
		n = len(rows)
		if n == 0 {
			return nil // nothing to write: the statement's planning alone costs a replica's start
		}
		if err := s.resolveKinds(ctx, q, w); err != nil {
			return err
		}
		return w.flush(ctx, q, now, s.cfg.Replica)
	})
	if n > 0 {
		s.todo.reset()
	}
	return n, err
}

// release takes back one reservation: a fresh one (no attempt yet) is deleted and its task is
// TODO again; a reserved retry is queued again; a reservation of a run the task has left is
// held for late results, as a settled row of that run.
func (s *Store) release(w *writes, d *dbsqlc.Dispatch, taskRun int32, taskStatus int16, now time.Time) {
	if len(d.AttemptWorkers) == 0 {
		w.del(d)
		if d.Run == taskRun && queue.Status(taskStatus) == queue.StatusDispatched {
			w.setTask(d.TaskID, queue.StatusTODO, taskRun)
		}
		return
	}
	s.hold(d, nil, now)
	d.Queued = d.Run == taskRun
	w.put(d)
}

// StillReserved reports which of the given tasks this replica still holds reserved.
func (s *Store) StillReserved(ctx context.Context, ids []int64) (map[int64]bool, error) {
	got, err := dbsqlc.New(s.pool).DispatchStillReserved(ctx, ids, s.cfg.Replica)
	if err != nil {
		return nil, translate("check reservations", err)
	}
	out := make(map[int64]bool, len(got))
	for _, id := range got {
		out[id] = true
	}
	return out, nil
}
