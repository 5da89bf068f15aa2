package lease

import (
	"context"
	"encoding/json"
	"errors"
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
	// TaskIDs, if any, limits it to these tasks (the dashboard's rerun of one task).
	TaskIDs []int64
	// Severity, Category and What, if set, limit it to tasks with a message of the current run
	// that matches all the set ones.
	Severity string
	Category string
	What     string
	// NoMessages, with Severity, selects instead the tasks with no message of that severity in
	// their current run (the report's category no_messages).
	NoMessages bool
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

// errNothingToRerun rolls back a rerun that selected no task: no run is closed or opened.
var errNothingToRerun = errors.New("no task selected")

// Selection returns the filters of a scope as the queries take them (TaskRerun, SandboxCopyTasks).
func (scope RerunScope) Selection() (statuses []int16, severity, category, what *string) {
	for _, st := range scope.Statuses {
		statuses = append(statuses, int16(st))
	}
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return statuses, str(scope.Severity), str(scope.Category), str(scope.What)
}

// Rerun moves the tasks of a scope to TODO in a new run, in one transaction: the statuses of
// every task of the corpus and service are kept as the closing run's (run_statuses, for
// `cortexq diff`), the selected tasks' messages go, fresh reservations of their old runs are
// deleted (nothing happened in them), the other open rows of the old runs settle so late
// results of those runs are stale, and the runs table closes the old run with its tallies and
// opens a new one; the tasks moved are noted for the report's next fold. A scope that selects no
// task changes nothing.
func (s *Store) Rerun(ctx context.Context, scope RerunScope) (RerunSummary, error) {
	var sum RerunSummary
	err := s.inTx(ctx, "rerun", true, func(q *dbsqlc.Queries, tx pgx.Tx, now time.Time) error {
		sum = RerunSummary{}
		tally, err := q.TaskTally(ctx, scope.CorpusID, scope.ServiceID)
		if err != nil {
			return fmt.Errorf("tally: %w", err)
		}
		// The run to close: the open one, or (tasks imported before run tracking) a new one.
		runID, err := q.RunLockOpen(ctx, scope.CorpusID, scope.ServiceID)
		if errors.Is(err, pgx.ErrNoRows) {
			runID, err = q.RunOpenReturning(ctx, scope.CorpusID, scope.ServiceID, now, "")
		}
		if err != nil {
			return fmt.Errorf("find the open run: %w", err)
		}
		// Its final statuses, before the selected tasks go back to TODO. A claim committing
		// between this statement and the next is in neither the snapshot nor the tally.
		if _, err := q.RunSnapshot(ctx, runID, scope.CorpusID, scope.ServiceID); err != nil {
			return fmt.Errorf("record the run's statuses: %w", err)
		}
		p := dbsqlc.TaskRerunParams{CorpusID: scope.CorpusID, ServiceID: scope.ServiceID, NoMessages: scope.NoMessages}
		p.Statuses, p.Severity, p.Category, p.What = scope.Selection()
		p.TaskIds = scope.TaskIDs
		rows, err := q.TaskRerun(ctx, p)
		if err != nil {
			return fmt.Errorf("move tasks to a new run: %w", err)
		}
		sum.Tasks = len(rows)
		if len(rows) == 0 {
			return errNothingToRerun
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
		if err := q.ReportChangesAdd(ctx, ids); err != nil {
			return fmt.Errorf("note the changes for the report: %w", err)
		}
		settled, err := q.DispatchSettleEarlierRuns(ctx, now.Add(s.lateWindow()), ids, runs)
		if err != nil {
			return fmt.Errorf("settle old runs: %w", err)
		}
		sum.Settled = int(settled)
		if err := q.MessageDeleteEarlierRuns(ctx, ids, runs); err != nil {
			return fmt.Errorf("delete old messages: %w", err)
		}
		scopeDoc, _ := json.Marshal(scope)
		if err := q.RunClose(ctx, dbsqlc.RunCloseParams{
			ID: runID, EndedAt: now, Scope: scopeDoc, Tasks: tally.Tasks, Todo: tally.Todo,
			NoProblem: tally.NoProblem, Warning: tally.Warning, Error: tally.Error,
			Fatal: tally.Fatal, Invalid: tally.Invalid, Blocked: tally.Blocked,
		}); err != nil {
			return fmt.Errorf("close run: %w", err)
		}
		return q.RunOpen(ctx, scope.CorpusID, scope.ServiceID, now, scope.Note)
	})
	if errors.Is(err, errNothingToRerun) {
		return RerunSummary{}, nil
	}
	return sum, err
}

// RerunPreview is what a Rerun of a scope would do, read without a lock: the preview a
// consequential mutation prints before it acts (cortexq rerun without --yes).
type RerunPreview struct {
	// Tasks would go back to TODO in a new run.
	Tasks int64
	// OpenRun is the run that would close (its id in the runs table); 0 if none is open (tasks
	// imported before run tracking), when the rerun opens and closes one first.
	OpenRun int64
}

// PreviewRerun counts the tasks a Rerun of scope would move (with the same filters as the
// rerun's own selection) and names the run it would close, changing nothing. The count is of
// the moment it is read: tasks finishing in between may change what the rerun then moves.
func (s *Store) PreviewRerun(ctx context.Context, scope RerunScope) (RerunPreview, error) {
	q := dbsqlc.New(s.pool)
	p := dbsqlc.TaskRerunCountParams{CorpusID: scope.CorpusID, ServiceID: scope.ServiceID, NoMessages: scope.NoMessages}
	p.Statuses, p.Severity, p.Category, p.What = scope.Selection()
	p.TaskIds = scope.TaskIDs
	n, err := q.TaskRerunCount(ctx, p)
	if err != nil {
		return RerunPreview{}, fmt.Errorf("count the tasks to rerun: %w", err)
	}
	run, err := q.RunOpenOf(ctx, scope.CorpusID, scope.ServiceID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return RerunPreview{}, fmt.Errorf("find the open run: %w", err)
	}
	return RerunPreview{Tasks: n, OpenRun: run}, nil
}

// RecordSources records the size and modification time of the sources of tasks ids again
// (`cortexq verify --requeue`: the source as it is now is the one their new run converts).
func (s *Store) RecordSources(ctx context.Context, ids, sizes []int64, mtimes []time.Time) error {
	if err := dbsqlc.New(s.pool).TaskSourceRecord(ctx, ids, sizes, mtimes); err != nil {
		return fmt.Errorf("record sources: %w", err)
	}
	return nil
}
