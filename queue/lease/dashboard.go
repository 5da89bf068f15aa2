package lease

import (
	"context"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// CompactTaskTotals sums the task_totals ledger's rows into one per corpus, service and status
// (the triggers on tasks append a row per statement that moves tasks). The report fold calls
// it; it reports how many rows remain.
func (s *Store) CompactTaskTotals(ctx context.Context) (int64, error) {
	n, err := dbsqlc.New(s.pool).TaskTotalsCompact(ctx)
	return n, translate("compact task totals", err)
}
