package lease

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// FoldBatchDefault is the number of noted changes one fold transaction takes.
const FoldBatchDefault = 5000

// foldMaxBatches bounds one FoldReports call; the next call goes on.
const foldMaxBatches = 1000

// FoldSummary reports what FoldReports did.
type FoldSummary struct {
	// Changes is the number of change notes folded, Tasks the distinct tasks they named.
	Changes int64
	Tasks   int64
	// Batches is the number of fold transactions.
	Batches int
	// Busy: another fold held the lock, so this one folded nothing.
	Busy bool
}

// FoldReports folds the changes the claim, reruns and deletions noted (report_changes) into the
// report rollups that ReportCategories and ReportWhats read, batch changes a transaction, until
// none is left (or foldMaxBatches): each changed task's earlier contribution is subtracted and
// its current one added. Folds take turns through an advisory lock; one that finds it taken
// returns at once with Busy. Claims and reruns never wait on a fold: they only append to
// report_changes, which a fold only deletes from.
func (s *Store) FoldReports(ctx context.Context, batch int) (FoldSummary, error) {
	if batch <= 0 {
		batch = FoldBatchDefault
	}
	var sum FoldSummary
	// The dashboard's task totals are compacted at the same pace (migration 00013).
	if _, err := s.CompactTaskTotals(ctx); err != nil {
		return sum, err
	}
	for sum.Batches < foldMaxBatches {
		var done dbsqlc.ReportFoldRow
		busy := false
		err := s.inTx(ctx, "report fold", true, func(q *dbsqlc.Queries, _ pgx.Tx, _ time.Time) error {
			locked, err := q.ReportFoldLock(ctx)
			if err != nil || !locked {
				busy = !locked
				return err
			}
			if err := q.ReportFoldSettings(ctx); err != nil {
				return err
			}
			if done, err = q.ReportFold(ctx, int32(batch)); err != nil {
				return err
			}
			return q.ReportFoldDone(ctx)
		})
		if err != nil {
			return sum, err
		}
		if busy {
			sum.Busy = true
			return sum, nil
		}
		sum.Batches++
		sum.Changes += done.Changes
		sum.Tasks += done.Tasks
		if done.Tasks == 0 {
			return sum, nil
		}
	}
	return sum, nil
}

// FoldState is how fresh the report rollups are.
type FoldState struct {
	// FoldedAt is when the last fold ended (nil: never); Age is how long ago, by the database's
	// clock.
	FoldedAt *time.Time    `json:"folded_at"`
	Age      time.Duration `json:"-"`
	// Pending is the number of change notes (of every corpus) waiting for the next fold.
	Pending int64 `json:"pending"`
}

// ReportFoldState says when the rollups were last folded and what waits for the next fold.
func (s *Store) ReportFoldState(ctx context.Context) (FoldState, error) {
	q := dbsqlc.New(s.pool)
	r, err := q.ReportFoldState(ctx)
	if err != nil {
		return FoldState{}, translate("report fold state", err)
	}
	st := FoldState{FoldedAt: r.FoldedAt, Pending: r.Pending}
	if r.FoldedAt != nil {
		now, err := q.ClockNow(ctx, s.injectedNow())
		if err != nil {
			return FoldState{}, translate("report fold state", err)
		}
		st.Age = max(now.Sub(*r.FoldedAt), 0)
	}
	return st, nil
}

// StatusSeverity is the severity of the messages the report counts for tasks of a final status
// (info for NoProblem; ReportSeverity's), and false for a status that is not final.
func StatusSeverity(st queue.Status) (queue.Severity, bool) {
	for _, s := range reportSeverities {
		if s.status == st {
			return s.message, true
		}
	}
	return "", false
}

// FoldAll folds every noted change as FoldReports does, waiting its turn while another fold
// runs (the periodic one, say): when it returns without error, every change committed before
// it was called is folded.
func (s *Store) FoldAll(ctx context.Context, batch int) (FoldSummary, error) {
	var sum FoldSummary
	for {
		f, err := s.FoldReports(ctx, batch)
		sum.Changes, sum.Tasks, sum.Batches = sum.Changes+f.Changes, sum.Tasks+f.Tasks, sum.Batches+f.Batches
		if err != nil || !f.Busy && f.Batches < foldMaxBatches {
			return sum, err
		}
		if f.Busy {
			select {
			case <-ctx.Done():
				return sum, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}
