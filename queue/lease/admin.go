package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// This file holds the operator's transitions pause and resume; rerun is in rerun.go. The
// operator's reads (progress, a task's history) are in queue/inspect.

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
		if err := s.resolveKinds(ctx, q, w); err != nil {
			return err
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
