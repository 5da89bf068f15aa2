package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// TablesRetention says how long prune keeps the rows that grow with time rather than with runs
// (docs/operations.md#retention): reaper passes (one a --reap-interval) and workers (one per
// worker process and service: a restart under a new name adds one).
type TablesRetention struct {
	// ReaperPasses and Workers are the ages past which rows go; 0 keeps them all.
	ReaperPasses time.Duration
	Workers      time.Duration
}

// TablesRetentionDefault keeps a week of reaper passes and workers seen within a week.
var TablesRetentionDefault = TablesRetention{ReaperPasses: 7 * 24 * time.Hour, Workers: 7 * 24 * time.Hour}

// TablesPruned counts what PruneTables deleted, and the rows left.
type TablesPruned struct {
	ReaperPasses     int64 `json:"reaper_passes"`
	Workers          int64 `json:"workers"`
	ReaperPassesLeft int64 `json:"reaper_passes_left"`
	WorkersLeft      int64 `json:"workers_left"`
	MessageKindsLeft int64 `json:"message_kinds_left"`
}

// pruneTablesBatch is how many rows one delete statement of PruneTables takes.
const pruneTablesBatch = 10000

// PruneTables deletes the reaper passes and the workers older than r says, in batches of their
// own statements (no long transaction), at the database clock.
func (s *Store) PruneTables(ctx context.Context, r TablesRetention) (TablesPruned, error) {
	var out TablesPruned
	q := dbsqlc.New(s.pool)
	now := s.injectedNow()
	for _, t := range []struct {
		keep  time.Duration
		del   func(context.Context, *time.Time, float64, int32) (int64, error)
		count *int64
		what  string
	}{
		{r.ReaperPasses, q.ReaperPassesPrune, &out.ReaperPasses, "reaper passes"},
		{r.Workers, q.WorkersPrune, &out.Workers, "workers"},
	} {
		for t.keep > 0 {
			n, err := t.del(ctx, now, t.keep.Seconds(), pruneTablesBatch)
			if err != nil {
				return out, fmt.Errorf("prune %s: %w", t.what, err)
			}
			*t.count += n
			if n < pruneTablesBatch {
				break
			}
		}
	}
	left, err := q.TablesCount(ctx)
	if err != nil {
		return out, fmt.Errorf("count tables: %w", err)
	}
	out.ReaperPassesLeft, out.WorkersLeft, out.MessageKindsLeft = left.ReaperPasses, left.Workers, left.MessageKinds
	return out, nil
}
