// Package reports answers what CorTeX's users read about a corpus and service: the report
// drill-down (severity, category, what, tasks), the run history and the diff between runs, and
// the sandboxes made from a slice. It keeps the rollups those read (the fold) and the dashboard's
// task totals compact. One result's cortex.log is parsed by queue/cortexlog; the lease transitions
// (rerun included) are queue/lease's.
package reports

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
)

// Store runs the report, runs, diff, sandbox and fold queries on a pool. It is safe for
// concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	now    queue.Clock
	logger *slog.Logger
	// names caches message_kinds names for the fold (foldBatch).
	names *nameCache
}

// New returns a Store on pool; now is the test clock (queue.Clock, nil: the database's); logger
// may be nil.
func New(pool *pgxpool.Pool, now queue.Clock, logger *slog.Logger) *Store {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Store{pool: pool, now: now, logger: logger.With("component", "reports"), names: &nameCache{}}
}

// injectedNow is the test clock's reading, or nil for the database clock.
func (s *Store) injectedNow() *time.Time { return s.now.Injected() }

// inTx runs fn in a transaction (pgtx.Run) with the clock read at its start; retry reruns it
// after a deadlock or serialization failure.
func (s *Store) inTx(ctx context.Context, what string, retry bool, fn pgtx.Func) error {
	return pgtx.Run(ctx, s.pool, pgtx.Options{What: what, Now: s.injectedNow(), Retry: retry,
		OnRetry: func(attempt int, err error) {
			s.logger.Debug("transaction retried", "what", what, "attempt", attempt, "error", err)
		}}, fn)
}
