// Package inspect answers operators' questions about the dispatch state, reading only: the
// progress of each corpus and service, everything on record about one task, dispatch counts,
// latency, the reaper's last pass, the invariants of sql/audit/invariants.sql, and the
// dashboard's figures (task totals, throughput, replicas, workers, leases out). The CLI (status,
// task) and the web dashboard use it; the transitions are queue/lease's.
package inspect

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue"
)

// Reader reads the dispatch state from a pool. It is safe for concurrent use.
type Reader struct {
	pool *pgxpool.Pool
	now  queue.Clock
}

// New returns a Reader on pool; now is the test clock (queue.Clock, nil: the database's).
func New(pool *pgxpool.Pool, now queue.Clock) *Reader {
	return &Reader{pool: pool, now: now}
}

// injectedNow is the test clock's reading, or nil for the database clock.
func (r *Reader) injectedNow() *time.Time { return r.now.Injected() }
