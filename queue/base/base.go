// Package base is cortexq's composition root: the pool, the clock and the logger, made once,
// and the rooms that read and write through them (catalog, inspect, reports, the worker-key
// allow-list) made once from those. The CLI's commands, the web dashboard and the replica
// (queue/replica) are handed a Base rather than opening rooms of their own; the replica hands
// its parts only what each uses (dispatch.Deps for the worker-facing server; the pool, the
// lease store and the reports to the reaper). The lease store, which a replica configures, is
// made from it with Lease.
package base

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/allowlist"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Base is the pool, clock and logger, and the rooms built on them. Its fields are set by New
// and not changed after.
type Base struct {
	// Pool is the database; Clock the test clock standing in for its clock (nil: the
	// database's); Logger receives every room's logs.
	Pool   *pgxpool.Pool
	Clock  queue.Clock
	Logger *slog.Logger

	Catalog   *catalog.Catalog // corpora, services, shares, imports
	Inspect   *inspect.Reader  // the dispatch state, read only
	Reports   *reports.Store   // reports, runs, diffs, sandboxes and the fold
	Allowlist *allowlist.List  // the CURVE worker keys
}

// New builds the rooms on pool, clock and logger (nil: discard).
func New(pool *pgxpool.Pool, clock queue.Clock, logger *slog.Logger) *Base {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Base{
		Pool: pool, Clock: clock, Logger: logger,
		Catalog:   catalog.New(pool, logger),
		Inspect:   inspect.New(pool, clock),
		Reports:   reports.New(pool, clock, logger),
		Allowlist: allowlist.New(pool),
	}
}

// Now reads the clock leases are decided by: the database's, or Clock when it is set.
func (b *Base) Now(ctx context.Context) (time.Time, error) {
	now, err := dbsqlc.New(b.Pool).ClockNow(ctx, b.Clock.Injected())
	if err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return now, nil
}

// Lease returns a lease store on the base's pool and clock; cfg's Logger, if nil, is the base's.
func (b *Base) Lease(cfg lease.Config) *lease.Store {
	cfg.NowFunc = b.Clock
	if cfg.Logger == nil {
		cfg.Logger = b.Logger
	}
	return lease.New(b.Pool, cfg)
}
