package lease

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Entry points only tests call: Lease runs the production steps back to back (Reserve, hand-out,
// Attribute, Release); Claim takes the claim's steps with a publish step; Return does what no
// production path does today (undo an attributed lease). Tests of
// other packages use queue/queuetest/leasetest.

// LeaseRequest asks for one task for each of Workers, all of one service.
type LeaseRequest struct {
	ServiceID int32
	// LeaseTimeout is the service's lease; zero takes the store's default.
	LeaseTimeout time.Duration
	// Workers are the requesting workers' identities, one task each at most.
	Workers []string
}

// Lease leases tasks of one service to the requesting workers: queued retries first, then TODO
// tasks, skipping rows other transactions hold. A worker gets at most one task; workers left
// over get none (the caller sends them a mock reply). A fresh task is never handed to a worker
// that worked an earlier run of it still on record.
//
// It is the reservation path run at once, for callers that lease on demand: Reserve as many
// tasks as there are workers, hand them out, Attribute the hand-outs, and Release what no
// worker could take. Every lease returned is committed.
func (s *Store) Lease(ctx context.Context, req LeaseRequest) ([]Lease, error) {
	if len(req.Workers) == 0 {
		return nil, nil
	}
	reserved, err := s.Reserve(ctx, ReserveRequest{ServiceID: req.ServiceID, LeaseTimeout: req.LeaseTimeout, Max: len(req.Workers)})
	if err != nil {
		return nil, err
	}
	workers := slices.Clone(req.Workers)
	var hs []HandOut
	var left []Reserved
	for i := range reserved {
		r := &reserved[i]
		j := slices.IndexFunc(workers, r.For)
		if j < 0 {
			left = append(left, *r) // every worker left worked an earlier run of it
			continue
		}
		hs = append(hs, r.HandOut(workers[j]))
		workers = slices.Delete(workers, j, j+1)
	}
	// A hand-out not attributed was claimed meanwhile: a reply for a reserved task records its
	// attempt (Claim). Its worker is not told it has a lease.
	leases, err := s.Attribute(ctx, hs)
	if _, rerr := s.Release(ctx, left); rerr != nil {
		s.logger.Warn("lease: reservations no worker could take were not released; the reaper returns them at their deadline",
			"tasks", len(left), "error", rerr)
	}
	if err != nil {
		return leases, err
	}
	byKey := make(map[rowKey]*Reserved, len(reserved))
	for i := range reserved {
		byKey[rowKey{reserved[i].TaskID, reserved[i].Run}] = &reserved[i]
	}
	for i := range leases {
		r := byKey[rowKey{leases[i].TaskID, leases[i].Run}]
		leases[i].CorpusID, leases[i].Entry, leases[i].Retry, leases[i].LastCause = r.CorpusID, r.Entry, r.Retry, r.LastCause
	}
	return leases, nil
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
			d.ForgetAt = ptrTime(now.Add(s.lateWindow()))
			w.put(d)
		}
		if err := s.resolveKinds(ctx, q, w); err != nil {
			return err
		}
		return w.flush(ctx, q, now, s.cfg.Replica)
	})
	return returned, err
}

// Claim claims results in the steps production takes (ClaimStocked), with publish, if not nil,
// as the publish step.
func (s *Store) Claim(ctx context.Context, results []Result, publish PublishFunc) ([]Decision, error) {
	return s.ClaimStocked(ctx, results, publish, nil)
}

// ClaimStocked claims results in the steps production takes: BeginClaim, the publishes, Commit with
// those that failed. A claim takes one result per task, so a result of a task that came
// before in results goes in a claim after, as the dispatch claimers batch them; the decisions
// come back in the order of results.
func (s *Store) ClaimStocked(ctx context.Context, results []Result, publish PublishFunc, stocked func(int64) bool) ([]Decision, error) {
	var all []Decision
	for len(results) > 0 {
		n := 1
		seen := map[int64]bool{results[0].TaskID: true}
		for ; n < len(results) && !seen[results[n].TaskID]; n++ {
			seen[results[n].TaskID] = true
		}
		ds, err := s.claimSteps(ctx, results[:n], publish, stocked)
		if err != nil {
			return all, err
		}
		all, results = append(all, ds...), results[n:]
	}
	return all, nil
}

// claimSteps is one claim of results of distinct tasks.
func (s *Store) claimSteps(ctx context.Context, results []Result, publish PublishFunc, stocked func(int64) bool) ([]Decision, error) {
	c, err := s.BeginClaim(ctx, results, stocked)
	if err != nil {
		return nil, err
	}
	defer c.Rollback()
	unpublished := map[*Decision]error{}
	if publish != nil {
		for _, d := range c.ToPublish {
			if err := publish(d); err != nil {
				unpublished[d] = err
			}
		}
	}
	return c.Commit(ctx, unpublished)
}

// Pool returns the store's pool, for this package's benchmarks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
