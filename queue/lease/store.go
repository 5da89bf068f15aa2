package lease

import (
	"cmp"
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Config configures a Store.
type Config struct {
	// Replica names this dispatcher replica in dispatch.replica and attempts.replica.
	Replica string
	// LeaseTimeout is the lease of a service without its own lease_timeout_seconds.
	LeaseTimeout time.Duration
	// LateResultWindow is how long a task out of flight is held for a late result;
	// LateResultWindowNone (negative): not at all.
	LateResultWindow time.Duration
	// ReservationTTL is how long a reservation holds a task for this replica before the reaper
	// may take it back (Reserve).
	ReservationTTL time.Duration
	// NowFunc, when set, replaces the database clock: tests move time with it (queue.Clock;
	// queue/base sets it to the base's clock).
	NowFunc queue.Clock
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	ReplicaDefault          = "replica"
	LeaseTimeoutDefault     = 240 * time.Second
	LateResultWindowDefault = time.Hour
)

// LateResultWindowNone, as Config.LateResultWindow, holds no task for late results.
const LateResultWindowNone = time.Duration(-1)

// WithDefaults returns a copy of c with every zero field set to its default; a negative
// duration is taken as zero too, except LateResultWindow, where it means none.
func (c Config) WithDefaults() Config {
	orDefault := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	c.Replica = cmp.Or(c.Replica, ReplicaDefault)
	c.LeaseTimeout = orDefault(c.LeaseTimeout, LeaseTimeoutDefault)
	c.LateResultWindow = cmp.Or(c.LateResultWindow, LateResultWindowDefault)
	c.ReservationTTL = orDefault(c.ReservationTTL, ReservationTTLDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Store runs the lease state machine's transitions against Postgres.
type Store struct {
	pool   *pgxpool.Pool
	cfg    Config
	logger *slog.Logger
	tally  tallies // worker counters waiting for FlushWorkers
	todo   cursors // where each service's next scan for TODO tasks starts
	kinds  kindCache
	// lastCommit is how long the last claim's writes and COMMIT took (nanoseconds): the
	// estimate of the next claim's, for its attempts' claim stage.
	lastCommit atomic.Int64
}

// New returns a Store on pool, with cfg's defaults applied (Config.WithDefaults).
func New(pool *pgxpool.Pool, cfg Config) *Store {
	cfg = cfg.WithDefaults()
	return &Store{pool: pool, cfg: cfg, logger: cfg.Logger.With("component", "lease")}
}

// lateWindow is how long a task out of flight is held for a late result: 0 for none.
func (s *Store) lateWindow() time.Duration { return max(s.cfg.LateResultWindow, 0) }

// Config returns the store's configuration, defaults applied.
func (s *Store) Config() Config { return s.cfg }

// Now reports the clock the store decides leases by.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	return dbsqlc.New(s.pool).ClockNow(ctx, s.injectedNow())
}

// DatabaseNow reports the database server's clock, ignoring NowFunc: the clock River's local
// readings are corrected to (queue/reaper).
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	now, err := dbsqlc.New(s.pool).ClockNow(ctx, nil)
	return now, translate("read the database clock", err)
}

func (s *Store) injectedNow() *time.Time { return s.cfg.NowFunc.Injected() }

// inTx runs fn in a transaction with the store's clock read at its start. When retry is set, a
// deadlock or serialization failure runs fn again (fn must then have no side effects).
func (s *Store) inTx(ctx context.Context, what string, retry bool, fn pgtx.Func) error {
	return pgtx.Run(ctx, s.pool, s.txOptions(what, retry), fn)
}

// retrying runs a transaction as inTx does, for the callers that begin it themselves.
func (s *Store) retrying(what string, retry bool, tx func() error) error {
	return pgtx.Retrying(s.txOptions(what, retry), tx)
}

func (s *Store) txOptions(what string, retry bool) pgtx.Options {
	return pgtx.Options{What: what, Now: s.injectedNow(), Retry: retry, OnRetry: func(attempt int, err error) {
		s.logger.Debug("transaction retried", "what", what, "attempt", attempt, "error", err)
	}}
}

// translate names what failed, with PostgreSQL's errors made cortexq's (pgtx.Wrap).
func translate(what string, err error) error { return pgtx.Wrap(what, err) }

// TunePool sets what a replica's connections need (as RuntimeParams: the CLI makes them with a SET
// per connection, or takes them from the role behind a transaction-mode pooler, never in the
// startup packet: docs/operations.md#poolers):
//
//   - enable_seqscan off: the dispatch table's statistics between vacuums made the planner
//     scan it whole on every claim (docs/performance.md#enable_seqscan);
//   - jit off: the lease statement's estimated cost grows with the TODO backlog, and JIT
//     compiled it on every call (docs/performance.md#jit);
//   - idle_in_transaction_session_timeout 60s: a replica frozen in the middle of a claim frees
//     its rows after a minute (docs/performance.md#idle-transactions).
func TunePool(cfg *pgxpool.Config) {
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	cfg.ConnConfig.RuntimeParams["jit"] = "off"
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "60s"
}

// Scope is queue.Scope, under the name this package's report code has used.
type Scope = queue.Scope
