// Package reaper runs the lease reaper as a River periodic job: River elects one leader among
// the replicas sharing a database, the leader enqueues a reap every interval, and a replica works
// it by calling [lease.Store.ReapAll]. The fold of the report rollups ([reports.Store.FoldPaced]) is
// a periodic job of the same client, in a queue of its own. Two passes at once stay correct (rows are taken with SKIP
// LOCKED), so a leadership change never needs care.
package reaper

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
)

// Args is the periodic reap job.
type Args struct{}

// Kind names the job in river_job.
func (Args) Kind() string { return "cortexq_reap" }

// InsertOpts runs a pass once: the next period brings the next one.
func (Args) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

// FoldArgs is the periodic fold of the report rollups ([reports.Store.FoldPaced]), in a queue of
// its own so that a long fold (the first one after migration 00011, say) never holds up a reap.
type FoldArgs struct{}

// Kind names the job in river_job.
func (FoldArgs) Kind() string { return "cortexq_report_fold" }

// InsertOpts runs a fold once, in the fold queue: the next period brings the next one.
func (FoldArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, Queue: FoldQueue}
}

// FoldQueue is the River queue of the report folds.
const FoldQueue = "cortexq_report"

// FoldIntervalDefault is the default time between report folds.
const FoldIntervalDefault = 10 * time.Second

type foldWorker struct {
	river.WorkerDefaults[FoldArgs]
	reports *reports.Store
	logger  *slog.Logger
}

// Work folds the changes noted since the last fold.
func (w *foldWorker) Work(ctx context.Context, _ *river.Job[FoldArgs]) error {
	start := time.Now()
	sum, err := w.reports.FoldPaced(ctx, 0)
	if err != nil {
		return fmt.Errorf("report fold: %w", err)
	}
	if sum.Tasks >= reports.FoldBatchDefault {
		w.logger.Info("report rollups folded", "changes", sum.Changes, "tasks", sum.Tasks,
			"took", time.Since(start).Round(time.Millisecond))
	}
	return river.RecordOutput(ctx, sum)
}

// Timeout bounds one fold (the next one goes on where it stopped).
func (w *foldWorker) Timeout(*river.Job[FoldArgs]) time.Duration { return 10 * time.Minute }

// PruneArgs is the periodic prune of the tables that grow with time
// ([lease.Store.PruneTables]), in a queue of its own: replicas of earlier releases, which do not
// know the job, never fetch it.
type PruneArgs struct{}

// Kind names the job in river_job.
func (PruneArgs) Kind() string { return "cortexq_prune_tables" }

// InsertOpts runs a prune once, in the prune queue: the next period brings the next one.
func (PruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, Queue: PruneQueue}
}

// PruneQueue is the River queue of the periodic prunes.
const PruneQueue = "cortexq_prune"

type pruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	store     *lease.Store
	retention lease.TablesRetention
	logger    *slog.Logger
}

// Work prunes the reaper passes and workers past their retention.
func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error {
	sum, err := w.store.PruneTables(ctx, w.retention)
	if err != nil {
		return fmt.Errorf("prune tables: %w", err)
	}
	if sum.ReaperPasses+sum.Workers > 0 {
		w.logger.Info("pruned", "reaper_passes", sum.ReaperPasses, "workers", sum.Workers,
			"reaper_passes_left", sum.ReaperPassesLeft, "workers_left", sum.WorkersLeft)
	}
	return river.RecordOutput(ctx, sum)
}

// Config configures the reaper.
type Config struct {
	// Interval between reap passes (0: IntervalDefault).
	Interval time.Duration
	// Logger receives River's and the reaper's logs.
	Logger *slog.Logger
	// OnPass, if set, is called with what each pass did (for metrics).
	OnPass func(lease.ReapSummary)
	// FoldInterval is the time between folds of the report rollups (0: FoldIntervalDefault).
	FoldInterval time.Duration
	// PruneEvery is the time between prunes of the reaper passes and workers past Retention
	// (0: never).
	PruneEvery time.Duration
	Retention  lease.TablesRetention
	// NowFunc, if set, replaces the local clock (time.Now) River reads; tests inject a skewed
	// clock with it. Either way River's readings are corrected to the database clock.
	NowFunc func() time.Time
}

// WithDefaults returns a copy of c with every unset field (zero) given its default.
func (c Config) WithDefaults() Config {
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	c.FoldInterval = cmp.Or(c.FoldInterval, FoldIntervalDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

func (c Config) validate() error {
	if c.Interval < 0 {
		return fmt.Errorf("reaper: negative interval %s", c.Interval)
	}
	if c.PruneEvery < 0 {
		return fmt.Errorf("reaper: negative prune interval %s", c.PruneEvery)
	}
	if c.FoldInterval < 0 {
		return fmt.Errorf("reaper: negative fold interval %s", c.FoldInterval)
	}
	return nil
}

// IntervalDefault is the default time between reap passes.
const IntervalDefault = 10 * time.Second

type reapWorker struct {
	river.WorkerDefaults[Args]
	store  *lease.Store
	clock  *dbClock
	logger *slog.Logger
	onPass func(lease.ReapSummary)
}

// Work runs one reap pass, and measures River's clock against the database's again.
func (w *reapWorker) Work(ctx context.Context, job *river.Job[Args]) error {
	if err := w.clock.sync(ctx); err != nil {
		w.logger.Warn("read the database clock", "error", err)
	}
	sum, err := w.store.ReapAll(ctx)
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	if w.onPass != nil {
		w.onPass(sum)
	}
	if sum != (lease.ReapSummary{}) {
		w.logger.Info("reaped", "requeued", sum.Requeued, "dead_lettered", sum.DeadLettered, "forgotten", sum.Forgotten,
			"reservations_released", sum.Released)
	}
	return river.RecordOutput(ctx, sum)
}

// Timeout bounds one pass.
func (w *reapWorker) Timeout(*river.Job[Args]) time.Duration { return 5 * time.Minute }

// New returns a River client on pool that reaps for store every cfg.Interval, and folds the
// report rollups (folds) every cfg.FoldInterval, once started.
func New(pool *pgxpool.Pool, store *lease.Store, folds *reports.Store, cfg Config) (*river.Client[pgx.Tx], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	logger := cfg.Logger
	clock := newDBClock(store, cfg.NowFunc, logger.With("component", "reaper"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := clock.sync(ctx)
	cancel()
	if err != nil {
		logger.Warn("read the database clock; River uses the local clock until the first reap pass", "error", err)
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &reapWorker{store: store, clock: clock, logger: logger.With("component", "reaper"), onPass: cfg.OnPass}); err != nil {
		return nil, fmt.Errorf("reaper worker: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &foldWorker{reports: folds, logger: logger.With("component", "report_fold")}); err != nil {
		return nil, fmt.Errorf("fold worker: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &pruneWorker{store: store, retention: cfg.Retention, logger: logger.With("component", "prune")}); err != nil {
		return nil, fmt.Errorf("prune worker: %w", err)
	}
	periodic := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(cfg.Interval),
			func() (river.JobArgs, *river.InsertOpts) { return Args{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(cfg.FoldInterval),
			func() (river.JobArgs, *river.InsertOpts) { return FoldArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
	}
	if cfg.PruneEvery > 0 {
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(cfg.PruneEvery),
			func() (river.JobArgs, *river.InsertOpts) { return PruneArgs{}, nil }, nil))
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}, FoldQueue: {MaxWorkers: 1},
			PruneQueue: {MaxWorkers: 1}},
		Workers:       workers,
		PeriodicJobs:  periodic,
		Logger:        slog.New(routineDebug{logger.Handler()}).With("component", "river"),
		FetchCooldown: 50 * time.Millisecond,
		// No LISTEN: any session of the database may NOTIFY River's channels (privileges cannot
		// stop it), and a forged river_control message would pause the reaper's queue or cancel
		// its pass. Polling only costs a new leader up to 5 s after one resigns.
		PollOnly:          true,
		FetchPollInterval: min(cfg.Interval, time.Second),
		// River's wall-clock readings, corrected to the database clock (see dbClock); its
		// queries still use now().
		Test: river.TestConfig{Time: clock},
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return client, nil
}

// routineDebug logs River's routine report of its job counts, which it gives at info level every
// few seconds, at debug level: at info it made up half of an idle replica's log.
type routineDebug struct{ h slog.Handler }

func (r routineDebug) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r routineDebug) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level == slog.LevelInfo && strings.HasPrefix(rec.Message, "producer: Producer job counts") {
		if !r.h.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		rec.Level = slog.LevelDebug
	}
	return r.h.Handle(ctx, rec)
}

func (r routineDebug) WithAttrs(as []slog.Attr) slog.Handler { return routineDebug{r.h.WithAttrs(as)} }
func (r routineDebug) WithGroup(name string) slog.Handler    { return routineDebug{r.h.WithGroup(name)} }
