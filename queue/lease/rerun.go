package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// RerunScope selects the tasks of one corpus and service to run again.
type RerunScope struct {
	CorpusID  int32
	ServiceID int32
	// Statuses, if any, limits the rerun to tasks with these statuses.
	Statuses []queue.Status
	// Severity, Category and What, if set, limit it to tasks with a message of the current run
	// that matches all the set ones.
	Severity string
	Category string
	What     string
	// Note is kept with the run history.
	Note string
}

// RerunSummary reports what a Rerun did.
type RerunSummary struct {
	// Tasks were moved to TODO in a new run.
	Tasks int
	// Settled open rows of the old runs (in flight, queued, or reserved retries) were taken out
	// of flight; their late results are stale.
	Settled int
	// Unreserved fresh reservations of the old runs (no attempt yet) were deleted.
	Unreserved int
}

// Rerun moves the tasks of a scope to TODO in a new run, in one transaction: their messages go,
// fresh reservations of their old runs are deleted (nothing happened in them), the other open
// rows of the old runs settle so late results of those runs are stale, and the runs table
// closes the old run with its tallies and opens a new one.
func (s *Store) Rerun(ctx context.Context, scope RerunScope) (RerunSummary, error) {
	var sum RerunSummary
	err := s.inTx(ctx, "rerun", true, func(q *dbsqlc.Queries, tx pgx.Tx, now time.Time) error {
		sum = RerunSummary{}
		tally, err := q.TaskTally(ctx, scope.CorpusID, scope.ServiceID)
		if err != nil {
			return fmt.Errorf("tally: %w", err)
		}
		p := dbsqlc.TaskRerunParams{CorpusID: scope.CorpusID, ServiceID: scope.ServiceID}
		if len(scope.Statuses) > 0 {
			for _, st := range scope.Statuses {
				p.Statuses = append(p.Statuses, int16(st))
			}
		}
		if scope.Category != "" || scope.What != "" || scope.Severity != "" {
			sev, cat, what := scope.Severity, scope.Category, scope.What
			if sev != "" {
				p.Severity = &sev
			}
			if cat != "" {
				p.Category = &cat
			}
			if what != "" {
				p.What = &what
			}
		}
		rows, err := q.TaskRerun(ctx, p)
		if err != nil {
			return fmt.Errorf("move tasks to a new run: %w", err)
		}
		sum.Tasks = len(rows)
		if len(rows) == 0 {
			return nil
		}
		ids, runs := make([]int64, len(rows)), make([]int32, len(rows))
		for i, r := range rows {
			ids[i], runs[i] = r.ID, r.Run
		}
		unreserved, err := q.DispatchDropEarlierReservations(ctx, ids, runs)
		if err != nil {
			return fmt.Errorf("drop old reservations: %w", err)
		}
		sum.Unreserved = int(unreserved)
		settled, err := q.DispatchSettleEarlierRuns(ctx, now.Add(s.cfg.LateResultWindow), ids, runs)
		if err != nil {
			return fmt.Errorf("settle old runs: %w", err)
		}
		sum.Settled = int(settled)
		if err := q.MessageDeleteEarlierRuns(ctx, ids, runs); err != nil {
			return fmt.Errorf("delete old messages: %w", err)
		}
		scopeDoc, _ := json.Marshal(scope)
		closed, err := q.RunCloseOpen(ctx, dbsqlc.RunCloseOpenParams{
			EndedAt: now, Scope: scopeDoc, Tasks: tally.Tasks, Todo: tally.Todo,
			NoProblem: tally.NoProblem, Warning: tally.Warning, Error: tally.Error,
			Fatal: tally.Fatal, Invalid: tally.Invalid, Blocked: tally.Blocked,
			CorpusID: scope.CorpusID, ServiceID: scope.ServiceID,
		})
		if err != nil {
			return fmt.Errorf("close run: %w", err)
		}
		if closed == 0 {
			if err := q.RunInsertClosed(ctx, dbsqlc.RunInsertClosedParams{
				EndedAt: now, Scope: scopeDoc, Tasks: tally.Tasks, Todo: tally.Todo,
				NoProblem: tally.NoProblem, Warning: tally.Warning, Error: tally.Error,
				Fatal: tally.Fatal, Invalid: tally.Invalid, Blocked: tally.Blocked,
				CorpusID: scope.CorpusID, ServiceID: scope.ServiceID,
			}); err != nil {
				return fmt.Errorf("record run: %w", err)
			}
		}
		return q.RunOpen(ctx, scope.CorpusID, scope.ServiceID, now, scope.Note)
	})
	return sum, err
}
