package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// The bench's own database reads and writes (sql/bench.sql): drain checks, generated backlogs
// and clean-up of its service. Nothing else uses them.

// pgErr wraps a query's error with what it was doing.
func pgErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// benchOpen reports whether a service has work left — a TODO task or a dispatch row in flight or
// queued: a drain check cheap enough to poll often (two index probes), unlike Progress.
func benchOpen(ctx context.Context, db dbsqlc.DBTX, serviceID int32) (bool, error) {
	r, err := dbsqlc.New(db).BenchOpen(ctx, serviceID)
	if err != nil {
		return false, pgErr("open tasks", err)
	}
	return r.Todo || r.Active, nil
}

// benchDiscardUnfinished deletes a service's TODO and dispatched tasks, with their dispatch rows,
// attempts and messages, and reports how many it deleted. It is for a service used by nothing
// else, like the bench's: every replica serving the service would otherwise lease those tasks.
func benchDiscardUnfinished(ctx context.Context, db dbsqlc.DBTX, serviceID int32) (int64, error) {
	n, err := dbsqlc.New(db).BenchDiscardUnfinished(ctx, serviceID)
	if err != nil {
		return 0, pgErr("discard unfinished tasks", err)
	}
	return n, nil
}

// benchGenerateTasks adds TODO tasks numbered first to last to a corpus, in the database alone, with
// the entries dir/NNNNNN/source.zip (archives or not), in id order: the bench's large backlogs
// (cortexq bench --corpora).
func benchGenerateTasks(ctx context.Context, db dbsqlc.DBTX, serviceID, corpusID int32, dir string, first, last int) (int64, error) {
	n, err := dbsqlc.New(db).BenchGenerateTasks(ctx, dbsqlc.BenchGenerateTasksParams{
		ServiceID: serviceID, CorpusID: corpusID, Dir: dir, First: int32(first), Last: int32(last)})
	if err != nil {
		return 0, pgErr("generate tasks", err)
	}
	// Fresh statistics keep the lease path on the tasks_todo index from the first lease on.
	if err := dbsqlc.New(db).TasksAnalyze(ctx); err != nil {
		return n, pgErr("analyze tasks", err)
	}
	return n, nil
}

// benchCorpusDone counts a corpus's NoProblem tasks of a service and gives the time from since
// (database clock) to its last accepted result.
func benchCorpusDone(ctx context.Context, db dbsqlc.DBTX, corpusID, serviceID int32, since time.Time) (int64, time.Duration, error) {
	r, err := dbsqlc.New(db).BenchCorpusDone(ctx, corpusID, serviceID, since)
	if err != nil {
		return 0, 0, pgErr("corpus done", err)
	}
	return r.NoProblem, time.Duration(r.LastS * float64(time.Second)), nil
}
