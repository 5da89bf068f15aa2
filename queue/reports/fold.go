package reports

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue/internal/pgtx"
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
// its current one added; the same tasks are recounted in the kept diff matrices (DiffFold), and
// then those are swept or reset where due (foldDiffs). Folds take turns through an advisory
// lock; one that finds it taken returns at once with Busy. Claims and reruns never wait on a
// fold: they only append to report_changes, which a fold only deletes from.
func (s *Store) FoldReports(ctx context.Context, batch int) (FoldSummary, error) {
	return s.foldReports(ctx, batch, false, false)
}

// FoldBatchPaced is the batch of the paced fold (FoldPaced): tens of milliseconds of
// PostgreSQL's time with LaTeXML-like logs (docs/performance.md#messages).
const FoldBatchPaced = 250

// foldPacedRest is how many times its own duration the paced fold rests after a batch: at most
// half a core. A quarter (a rest of 3) fell behind the claims of LaTeXML-like logs at full
// speed (docs/performance.md#messages).
const foldPacedRest = 1

// FoldPaced is FoldReports for the periodic fold beside live traffic: small batches, and after
// each a rest of foldPacedRest times its duration (docs/performance.md#latency-at-a-steady-rate):
// a fold of thousands of tasks in one statement holds a core for hundreds of milliseconds, and
// on a busy machine the claims behind it wait as long.
func (s *Store) FoldPaced(ctx context.Context, batch int) (FoldSummary, error) {
	return s.foldReports(ctx, cmp.Or(batch, FoldBatchPaced), false, true)
}

// foldReports is FoldReports; force recounts the kept diff matrices now (foldDiffs); pace
// rests after each batch (foldPacedRest).
func (s *Store) foldReports(ctx context.Context, batch int, force, pace bool) (FoldSummary, error) {
	if batch <= 0 {
		batch = FoldBatchDefault
	}
	var sum FoldSummary
	// The dashboard's task totals are compacted at the same pace (migration 00013).
	if _, err := s.CompactTaskTotals(ctx); err != nil {
		return sum, err
	}
	// Whether any diff matrix is kept (DiffFold has work): one look a call.
	diffKept, err := dbsqlc.New(s.pool).DiffKeptAny(ctx)
	if err != nil {
		return sum, pgtx.Wrap("report fold", err)
	}
	for sum.Batches < foldMaxBatches {
		var changes int64
		var ids []int64
		busy := false
		start := time.Now()
		err := s.inTx(ctx, "report fold", true, func(q *dbsqlc.Queries, _ pgx.Tx, _ time.Time) error {
			locked, err := q.ReportFoldLock(ctx)
			if err != nil || !locked {
				busy = !locked
				return err
			}
			if err := q.ReportFoldSettings(ctx); err != nil {
				return err
			}
			if changes, ids, err = s.foldBatch(ctx, q, batch); err != nil {
				return err
			}
			if len(ids) > 0 && diffKept {
				if _, err := q.DiffFold(ctx, ids); err != nil {
					return fmt.Errorf("diff fold: %w", err)
				}
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
		sum.Changes += changes
		sum.Tasks += int64(len(ids))
		if len(ids) == 0 {
			break
		}
		if pace {
			select {
			case <-ctx.Done():
				return sum, ctx.Err()
			case <-time.After(foldPacedRest * time.Since(start)):
			}
		}
	}
	if sum.Batches < foldMaxBatches {
		busy, err := s.foldDiffs(ctx, force)
		sum.Busy = busy
		return sum, err
	}
	return sum, nil
}

// diffPause is how many times its own duration a sweep or reset of a kept diff matrix waits
// before the next one of the same corpus and service: at most about 1/20 of a core.
const diffPause = 19

// foldDiffs keeps the diff matrices of the last closed run and the open one (diff_current):
// after a rerun, a reset counts the corpus and service's matrix afresh; otherwise a sweep
// recounts the tasks whose status is not final (leases, expiries and pauses change those
// without noting them for the fold). Each is rate-limited (diffPause) unless force, and runs in a
// transaction of its own holding the fold's lock; busy says another fold held it.
func (s *Store) foldDiffs(ctx context.Context, force bool) (busy bool, err error) {
	scopes, err := dbsqlc.New(s.pool).DiffScopes(ctx)
	if err != nil {
		return false, pgtx.Wrap("diff fold", err)
	}
	for _, sc := range scopes {
		if !force && !sc.Due {
			continue
		}
		start := time.Now()
		err := s.inTx(ctx, "diff fold", true, func(q *dbsqlc.Queries, _ pgx.Tx, _ time.Time) error {
			locked, err := q.ReportFoldLock(ctx)
			if err != nil || !locked {
				busy = !locked
				return err
			}
			if err := q.ReportFoldSettings(ctx); err != nil {
				return err
			}
			if sc.KeptFromRun != sc.FromRun || sc.KeptToRun != sc.ToRun {
				if err := q.DiffResetClear(ctx, sc.CorpusID, sc.ServiceID); err != nil {
					return err
				}
				if _, err := q.DiffResetCount(ctx, sc.FromRun, sc.CorpusID, sc.ServiceID, sc.ToRun); err != nil {
					return err
				}
			} else {
				ids, err := q.DiffSweepTasks(ctx, sc.CorpusID, sc.ServiceID)
				if err != nil {
					return err
				}
				if len(ids) > 0 {
					if _, err := q.DiffFold(ctx, ids); err != nil {
						return err
					}
				}
			}
			pause := time.Since(start).Seconds() * diffPause
			return q.DiffSwept(ctx, pause, sc.CorpusID, sc.ServiceID)
		})
		if err != nil || busy {
			return busy, err
		}
	}
	return false, nil
}

// FoldState is how fresh the report rollups are.
type FoldState struct {
	// FoldedAt is when the last fold ended (nil: never); Age is how long ago, by the database's
	// clock.
	FoldedAt *time.Time    `json:"folded_at"`
	Age      time.Duration `json:"-"`
	// Pending is the number of change notes (of every corpus) waiting for the next fold.
	Pending int64 `json:"pending"`
	// Standby is set when the database is a hot standby: its rollups are the primary's as of
	// its replay, which Replayed says the age of (the last replayed commit's, by the
	// standby's clock; negative: nothing replayed since the standby started). The primary's
	// replicas fold; a standby never does (docs/operations.md#audits-on-a-standby).
	Standby  bool          `json:"standby,omitempty"`
	Replayed time.Duration `json:"-"`
}

// StandbyNote says, on a hot standby, how fresh its copy of the primary is; "" on a primary.
func (f FoldState) StandbyNote() string {
	switch {
	case !f.Standby:
		return ""
	case f.Replayed < 0:
		return "a standby: nothing replayed since it started"
	default:
		return fmt.Sprintf("a standby: its last replayed commit is %s old", f.Replayed.Round(time.Second))
	}
}

// ReportFoldState says when the rollups were last folded and what waits for the next fold.
func (s *Store) ReportFoldState(ctx context.Context) (FoldState, error) {
	q := dbsqlc.New(s.pool)
	r, err := q.ReportFoldState(ctx)
	if err != nil {
		return FoldState{}, pgtx.Wrap("report fold state", err)
	}
	st := FoldState{FoldedAt: r.FoldedAt, Pending: r.Pending, Standby: r.Standby,
		Replayed: time.Duration(r.ReplayAgeSeconds * float64(time.Second))}
	if r.FoldedAt != nil {
		now, err := q.ClockNow(ctx, s.injectedNow())
		if err != nil {
			return FoldState{}, pgtx.Wrap("report fold state", err)
		}
		st.Age = max(now.Sub(*r.FoldedAt), 0)
	}
	return st, nil
}

// FoldAll folds every noted change as FoldReports does, waiting its turn while another fold
// runs (the periodic one, say): when it returns without error, every change committed before
// it was called is folded. It recounts the kept diff matrices now, whatever their pause.
func (s *Store) FoldAll(ctx context.Context, batch int) (FoldSummary, error) {
	return s.foldUntilDone(ctx, batch, true)
}

// FoldPending is FoldAll as the periodic fold does it: the kept diff matrices are recounted
// only when their pause is over, so its cost is the noted changes' (cortexq bench measures it).
func (s *Store) FoldPending(ctx context.Context, batch int) (FoldSummary, error) {
	return s.foldUntilDone(ctx, batch, false)
}

// foldUntilDone folds until no noted change is left, waiting while another fold runs.
func (s *Store) foldUntilDone(ctx context.Context, batch int, force bool) (FoldSummary, error) {
	var sum FoldSummary
	for {
		f, err := s.foldReports(ctx, batch, force, false)
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
