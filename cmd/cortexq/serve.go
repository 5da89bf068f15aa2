package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/dispatch"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reaper"
	"github.com/cortexq/cortexq/queue/replica"
	"github.com/cortexq/cortexq/queue/wire"
)

func serveCommand() *cli.Command {
	host, _ := os.Hostname()
	return &cli.Command{
		Name:  "serve",
		Usage: "run one dispatcher replica: ventilator, sink and the leader-elected reaper",
		Description: "A replica leases tasks to workers that request them on --ventilator, streams their source\n" +
			"archives, and records the results they push to --sink. Every lease and result is a row in\n" +
			"PostgreSQL, so several replicas can share one database and a replica killed with kill -9\n" +
			"comes back with no recovery step. One replica at a time (elected through River) runs the\n" +
			"reaper every --reap-interval. On SIGTERM or SIGINT a replica stops leasing, waits up to\n" +
			"--drain-timeout for the results of its leases, and exits 0. SIGUSR1 drains it without stopping\n" +
			"it: no new leases, results still taken (docs/operations.md#sigterm-kill--9-and-outages).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "replica", Usage: "this replica's name in dispatch rows and attempts", Value: fmt.Sprintf("%s-%d", host, os.Getpid()), EnvVars: envVars("REPLICA")},
			&cli.StringFlag{Name: "ventilator", Usage: "ZeroMQ endpoint (ROUTER) workers request tasks from", Value: dispatch.VentilatorAddrDefault, EnvVars: envVars("VENTILATOR")},
			&cli.StringFlag{Name: "sink", Usage: "ZeroMQ endpoint (PULL) workers push results to", Value: dispatch.SinkAddrDefault, EnvVars: envVars("SINK")},
			&cli.StringFlag{Name: "http", Usage: "address serving /metrics and /healthz (loopback unless told otherwise, e.g. 0.0.0.0:9464 for a scraper elsewhere); empty: none", Value: httpAddrDefault, EnvVars: envVars("HTTP")},
			&cli.IntFlag{Name: "max-in-flight", Usage: "leases this replica holds at most before it answers 'no work' (backpressure)", Value: dispatch.MaxInFlightDefault, EnvVars: envVars("MAX_IN_FLIGHT")},
			&cli.IntFlag{Name: "io-threads", Usage: "libzmq I/O threads for the worker connections (ZMQ_IO_THREADS): they accept and serve the connections", Value: dispatch.IOThreadsDefault, EnvVars: envVars("IO_THREADS")},
			&cli.IntFlag{Name: "max-in-flight-per-worker", Usage: "unanswered leases of this replica one worker identity may hold; past it a request gets 'no work' (worker_cap)", Value: dispatch.MaxInFlightPerWorkerDefault, EnvVars: envVars("MAX_IN_FLIGHT_PER_WORKER")},
			&cli.IntFlag{Name: "max-in-flight-per-key", Usage: "with CURVE, unanswered leases of this replica all the workers of one key may hold together (0: no cap per key)", Value: 0, EnvVars: envVars("MAX_IN_FLIGHT_PER_KEY")},
			&cli.DurationFlag{Name: "reservation-ttl", Usage: "how long a task this replica reserved ahead of demand stays its own: if the replica dies (or freezes) holding it, the reaper gives it back after this, with no attempt counted; the replica hands out only reservations younger than a third of it", Value: lease.ReservationTTLDefault, EnvVars: envVars("RESERVATION_TTL")},
			&cli.DurationFlag{Name: "lease-timeout", Usage: "lease of a service without its own lease_timeout_seconds; a retry gets (retries+1) times it", Value: lease.LeaseTimeoutDefault, EnvVars: envVars("LEASE_TIMEOUT")},
			&cli.DurationFlag{Name: "late-result-window", Usage: "how long a task out of flight still takes a late result (0: none)", Value: lease.LateResultWindowDefault, EnvVars: envVars("LATE_RESULT_WINDOW")},
			&cli.DurationFlag{Name: "fold-interval", Usage: "time between folds of the report rollups (run by the elected leader); reports are as fresh as the last fold", Value: reaper.FoldIntervalDefault, EnvVars: envVars("FOLD_INTERVAL")},
			&cli.DurationFlag{Name: "reap-interval", Usage: "time between reaper passes (run by the elected leader)", Value: reaper.IntervalDefault, EnvVars: envVars("REAP_INTERVAL")},
			&cli.DurationFlag{Name: "drain-timeout", Usage: "on SIGTERM, how long to wait for the results of this replica's leases", Value: 60 * time.Second, EnvVars: envVars("DRAIN_TIMEOUT")},
			&cli.DurationFlag{Name: "db-outage-budget", Usage: "how long database calls may keep failing, from the first failure, before the replica stops and exits non-zero (stopping takes up to ~10 s more; nothing is lost: restart it later); 0: never", Value: dispatch.OutageBudgetDefault, EnvVars: envVars("DB_OUTAGE_BUDGET")},
			&cli.DurationFlag{Name: "db-call-timeout", Usage: "deadline of each database call of the worker-facing side (reservation, claim, attribution, lookup): a call on a link gone silent fails after it, and the replica holds results and stops leasing until the database answers again", Value: dispatch.DBTimeoutDefault, EnvVars: envVars("DB_CALL_TIMEOUT")},
			&cli.IntFlag{Name: "outage-held-results", Usage: "results held in memory while the database is away, claimed once it is back; past it (or --outage-held-bytes) a result is refused and its task runs again once its lease expires", Value: dispatch.OutageHeldResultsDefault, EnvVars: envVars("OUTAGE_HELD_RESULTS")},
			&cli.Int64Flag{Name: "outage-held-bytes", Usage: "bytes of the results held in memory while the database is away (see --outage-held-results)", Value: dispatch.OutageHeldBytesDefault, EnvVars: envVars("OUTAGE_HELD_BYTES")},
			&cli.Int64Flag{Name: "max-result-bytes", Usage: "results larger than this are recorded Invalid (cortex/result_too_large)", Value: dispatch.MaxResultBytesDefault, EnvVars: envVars("MAX_RESULT_BYTES")},
			&cli.IntFlag{Name: "max-messages", Usage: "log messages of each severity a result keeps (1 to 100000); the rest are counted in one cortex/messages_truncated message of that severity", Value: dispatch.MaxMessagesDefault, EnvVars: envVars("MAX_MESSAGES")},
			&cli.IntFlag{Name: "message-size", Usage: "payload chunk size in bytes; keep 100000 with upstream CorTeX workers, which end a payload at its first frame shorter than 100000 bytes (another size cuts their archives; warned at start)", Value: wire.MessageSize, EnvVars: envVars("MESSAGE_SIZE")},
			&cli.IntFlag{Name: "tcp-keepalive-idle", Usage: "TCP keepalive idle seconds on worker sockets (interval 30 s, 4 probes); <= 0 disables", Value: dispatch.TCPKeepaliveIdleDefault, EnvVars: envVars("TCP_KEEPALIVE_IDLE")},
			&cli.BoolFlag{Name: "sync-archives", Usage: "make result archives durable before their claim commits (one syncfs per claim batch)", Value: true, EnvVars: envVars("SYNC_ARCHIVES")},
			&cli.IntFlag{Name: "reserve-batch", Usage: "advanced: most tasks one reservation takes; the stock of reserved tasks a replica keeps per service follows its last 100 ms of requests, scaled to the whole service's demand where replicas share it (service_demand), from 16 up to this", Value: dispatch.ReserveBatchDefault, EnvVars: envVars("RESERVE_BATCH")},
			&cli.IntFlag{Name: "leasers", Usage: "reservation transactions (reserve, give back, check the stock) running at once", Value: dispatch.LeasersDefault, EnvVars: envVars("LEASERS")},
			&cli.IntFlag{Name: "claimers", Usage: "claim transactions running at once, in a relay: where a claim's first round trip takes 5 ms or more (a distant database), one gathers and reads its batch while the one before it writes and commits, so that their round trips overlap (1: each claim waits for the one before to end)", Value: dispatch.ClaimersDefault, EnvVars: envVars("CLAIMERS")},
			&cli.IntFlag{Name: "claim-batch", Usage: "most results one claim transaction records", Value: dispatch.ClaimBatchDefault, EnvVars: envVars("CLAIM_BATCH")},
			&cli.DurationFlag{Name: "claim-flush", Usage: "how long a claim batch waits for more results, counted from when its first was queued for a claim (latency against transactions per result); where this replica has a part of its services' demand, longer in proportion (up to 40 ms more), so that its batches are as large as one replica's", Value: dispatch.ClaimFlushDefault, EnvVars: envVars("CLAIM_FLUSH")},
			&cli.BoolFlag{Name: "sweep-at-start", Usage: "at start-up, sweep the corpora for leftover temp and kept-aside archives in the background (false: leave it to `cortexq sweep`)", Value: true, EnvVars: envVars("SWEEP_AT_START")},
			&cli.IntFlag{Name: "sweep-pace", Usage: "the start-up sweep's pace, in directory entries a second, so that a replica restarted again and again does not spend each start walking the corpora (0: as fast as the disk goes)", Value: sweepPaceDefault, EnvVars: envVars("SWEEP_PACE")},
			&cli.DurationFlag{Name: "sweep-orphan-age", Usage: "at start-up, besides this replica's earlier processes' leftover temp and kept-aside archives, remove any replica's older than this, in the background (0: only this replica's)", Value: archive.SweepOrphanAgeDefault, EnvVars: envVars("SWEEP_ORPHAN_AGE")},
			&cli.IntFlag{Name: "db-pool-size", Usage: "database connections of this replica (at least 4)", Value: 16, EnvVars: envVars("DB_POOL_SIZE")},
			curveSecretKeyFileFlag(),
			keysRefreshFlag(),
			jobWorkersFlag(2), jobBeatFlag(),
			&cli.DurationFlag{Name: "prune-tables-every", Usage: "time between prunes of the reaper passes and workers past --reaper-passes-age and --workers-age (run by the elected leader, as prune --tables; 0: never)", Value: time.Hour, EnvVars: envVars("PRUNE_TABLES_EVERY")},
		}, append(tablesRetentionFlags(), clockSkewFlags()...)...),
		Action: serve,
	}
}

// maxMessagesLimit bounds --max-messages: a result's messages are held in memory until claimed
// and written in one claim transaction.
const maxMessagesLimit = 100_000

// sweepPaceDefault is --sweep-pace's default: a corpus of a million entries (three directory
// entries each) is swept in 25 minutes, at a few percent of a core.
const sweepPaceDefault = 2000

// checkServeFlags refuses values that make no sense, rather than quietly taking defaults for
// them: a flag given is a flag meant.
func checkServeFlags(c *cli.Context) error {
	for _, f := range []struct {
		name string
		min  int
	}{
		{"max-in-flight", 1}, {"io-threads", 1}, {"max-in-flight-per-worker", 1}, {"max-in-flight-per-key", 0},
		{"message-size", 1}, {"reserve-batch", 1}, {"outage-held-results", 1}, {"leasers", 1}, {"claimers", 1}, {"claim-batch", 1},
		{"sweep-pace", 0},
		// Leases, claims, the hot mirror's resync, River's leader election and the reaper's pass.
		{"db-pool-size", 4},
	} {
		if n := c.Int(f.name); n < f.min {
			return usagef(c, "--%s %d: want at least %d", f.name, n, f.min)
		}
	}
	if n := c.Int("max-messages"); n < 1 || n > maxMessagesLimit {
		return usagef(c, "--max-messages %d: want 1 to %d", n, maxMessagesLimit)
	}
	for _, name := range []string{"max-result-bytes", "outage-held-bytes"} {
		if n := c.Int64(name); n < 1 {
			return usagef(c, "--%s %d: want at least 1", name, n)
		}
	}
	for _, f := range []struct {
		name string
		min  time.Duration
		why  string
	}{
		{"lease-timeout", time.Second, "at least 1s (leases are whole seconds)"},
		{"reservation-ttl", 3 * time.Second, "at least 3s"},
		{"reap-interval", time.Millisecond, "a positive duration"},
		{"keys-refresh", time.Millisecond, "a positive duration"},
		{"claim-flush", 0, "0 or more"},
		{"drain-timeout", 0, "0 or more"},
		{"prune-tables-every", 0, "0 (never) or more"},
		{"reaper-passes-age", 0, "0 (kept) or more"},
		{"workers-age", 0, "0 (kept) or more"},
		{"late-result-window", 0, "0 (none) or more"},
		{"db-outage-budget", 0, "0 (never give up) or more"},
		{"db-call-timeout", 100 * time.Millisecond, "at least 100ms"},
		{"sweep-orphan-age", 0, "0 (only this replica's) or more"},
	} {
		if d := c.Duration(f.name); d < f.min {
			return usagef(c, "--%s %s: want %s", f.name, d, f.why)
		}
	}
	return nil
}

func serve(c *cli.Context) error {
	tuneGC()
	limitServeMemory()
	if c.Args().Present() {
		return usagef(c, "unexpected argument %q", c.Args().First())
	}
	if err := checkServeFlags(c); err != nil {
		return err
	}
	logger := slog.Default().With("replica", c.String("replica"))
	if path := os.Getenv("CORTEXQ_CPUPROFILE"); path != "" { // for cortexq bench --cpuprofile
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	poolSize := func(cfg *pgxpool.Config) { cfg.MaxConns = int32(c.Int("db-pool-size")) }
	root, closePool, err := openBase(c, poolSize, lease.TunePool)
	if err != nil {
		return err
	}
	defer closePool()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	cfg, err := replicaConfig(c, root, reg, logger)
	if err != nil {
		return err
	}
	// One live process a name: its start-up sweep removes the name's other processes' temp files.
	mode, err := pooler(c)
	if err != nil {
		return err
	}
	name, err := root.Lease(cfg.Lease).HoldName(c.Context, mode != poolerTransaction)
	if err != nil {
		return err
	}
	defer name.Release()
	// The name is this process's: what reservations it holds are a dead process's stock.
	if n, err := root.Lease(cfg.Lease).ReleaseEarlier(c.Context); err != nil {
		return fmt.Errorf("release the reservations of this replica's earlier process: %w", err)
	} else if n > 0 {
		logger.Info("released the reservations of this replica's earlier process (its tasks are TODO again)", "released", n)
	}
	if cfg.Jobs, err = jobRunner(c, root, c.String("replica"), logger); err != nil {
		return err
	}
	rep, err := replica.New(root, cfg)
	if err != nil {
		return usagef(c, "%v", err)
	}
	reg.MustRegister(&leaderCollector{reads: root.Inspect, clientID: rep.LeaderID()}, &corpusFSCollector{catalog: root.Catalog})
	logVersion(logger, "replica") // once every check has passed: a refusal stays one line
	defer drainOnSIGUSR1(rep.Server(), logger)()
	if err := rep.Run(c.Context); err != nil {
		return fmt.Errorf("replica %s: %w", c.String("replica"), err)
	}
	logger.Info("stopped")
	return nil
}

// replicaConfig is the replica serve's flags describe: its lease store, worker-facing side,
// reaper, metrics endpoint and start-up sweep.
func replicaConfig(c *cli.Context, root *base.Base, reg *prometheus.Registry, logger *slog.Logger) (replica.Config, error) {
	window := c.Duration("late-result-window")
	if window == 0 { // the flag's 0: none
		window = lease.LateResultWindowNone
	}
	budget := c.Duration("db-outage-budget")
	if budget <= 0 {
		budget = -1
	}
	security, err := serveSecurity(c)
	if err != nil {
		return replica.Config{}, err
	}
	reaped := newReapMetrics(reg, root.Inspect)
	// River's loops and the lease store's periodic writes log each failure: during an outage,
	// once per quietWindow.
	quiet := newQuietLogger(logger)
	cfg := replica.Config{
		Lease: lease.Config{
			Replica: c.String("replica"), LeaseTimeout: c.Duration("lease-timeout"),
			LateResultWindow: window, ReservationTTL: c.Duration("reservation-ttl"), Logger: quiet,
		},
		Dispatch: dispatch.Config{
			VentilatorAddr: c.String("ventilator"), SinkAddr: c.String("sink"), Security: security,
			MaxInFlight: c.Int("max-in-flight"), MessageSize: c.Int("message-size"),
			IOThreads: c.Int("io-threads"), MaxInFlightPerWorker: c.Int("max-in-flight-per-worker"), MaxInFlightPerKey: c.Int("max-in-flight-per-key"),
			MaxResultBytes: c.Int64("max-result-bytes"), MaxMessages: c.Int("max-messages"),
			TCPKeepaliveIdle: c.Int("tcp-keepalive-idle"),
			SyncArchives:     c.Bool("sync-archives"), OutageBudget: budget,
			DBTimeout: c.Duration("db-call-timeout"), OutageHeldResults: c.Int("outage-held-results"),
			OutageHeldBytes: c.Int64("outage-held-bytes"),
			ReserveBatch:    c.Int("reserve-batch"), Leasers: c.Int("leasers"), Claimers: c.Int("claimers"),
			ClaimBatch: c.Int("claim-batch"), ClaimFlush: c.Duration("claim-flush"),
			Logger: logger, Registerer: reg,
		},
		Reaper: reaper.Config{Interval: c.Duration("reap-interval"), FoldInterval: c.Duration("fold-interval"),
			PruneEvery: c.Duration("prune-tables-every"), Retention: tablesRetention(c),
			Logger: quiet, OnPass: reaped.observe, NowFunc: clockSkew(c)}, // clockSkew: nil outside the test binary
		Fallback:     true,
		DrainTimeout: c.Duration("drain-timeout"),
	}
	if addr := c.String("http"); addr != "" {
		cfg.HTTP = replica.Funcs(func(context.Context) (func(), error) { return serveHTTP(addr, reg, root.Pool, logger) })
	}
	// What earlier processes of this replica left in the corpora (a kill -9 mid-claim), and
	// anyone's past --sweep-orphan-age: swept in the background, since a corpus may be large.
	if c.Bool("sweep-at-start") {
		cfg.Sweep = func(ctx context.Context, srv *dispatch.Server) {
			sc := archive.SweepConfig{Replica: c.String("replica"), Incarnation: srv.Incarnation(),
				OrphanAge: c.Duration("sweep-orphan-age"), Pace: c.Int("sweep-pace")}
			if err := sweepCorpora(ctx, root.Catalog, sc, logger, nil); err != nil && ctx.Err() == nil {
				logger.Warn("start-up sweep", "error", err)
			}
		}
	}
	return cfg, nil
}

// reapMetrics exports the reaper's passes and the database's view of the dispatch table.
type reapMetrics struct {
	requeued, deadLettered, forgotten, released prometheus.Counter
}

func newReapMetrics(reg prometheus.Registerer, reads *inspect.Reader) *reapMetrics {
	m := &reapMetrics{
		requeued:     prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_reaper_requeued_total", Help: "Expired leases queued for a retry by this replica's reaper passes."}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_reaper_dead_lettered_total", Help: "Expired leases dead-lettered by this replica's reaper passes."}),
		forgotten:    prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_reaper_forgotten_total", Help: "Held rows forgotten by this replica's reaper passes."}),
		released:     prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_reaper_reservations_released_total", Help: "Reservations past their deadline (their replica died or froze) taken back by this replica's reaper passes."}),
	}
	reg.MustRegister(m.requeued, m.deadLettered, m.forgotten, m.released, &dispatchCollector{reads: reads})
	return m
}

func (m *reapMetrics) observe(s lease.ReapSummary) {
	m.requeued.Add(float64(s.Requeued))
	m.deadLettered.Add(float64(s.DeadLettered))
	m.forgotten.Add(float64(s.Forgotten))
	m.released.Add(float64(s.Released))
}

// dispatchCollector reads the dispatch table's counts at scrape time.
type dispatchCollector struct{ reads *inspect.Reader }

var (
	descDispatchRows = prometheus.NewDesc("cortexq_dispatch_rows", "Dispatch rows of all replicas, by state: reserved (held by a replica for a hand-out), in_flight, settling, queued (retries waiting), dead_lettered.", []string{"state"}, nil)
)

func (d *dispatchCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descDispatchRows }

func (d *dispatchCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := d.reads.DispatchCounts(ctx)
	if err != nil {
		return
	}
	for _, kv := range []struct {
		state string
		n     int64
	}{{"reserved", counts.Reserved}, {"in_flight", counts.InFlight}, {"settling", counts.Settling}, {"queued", counts.Queued}, {"dead_lettered", counts.DeadLettered}} {
		ch <- prometheus.MustNewConstMetric(descDispatchRows, prometheus.GaugeValue, float64(kv.n), kv.state)
	}
}

// drainOnSIGUSR1 makes SIGUSR1 drain the replica without stopping it: it leases nothing more
// (requests get "no work") and keeps taking the results of its leases, until SIGTERM stops it
// (docs/operations.md#sigterm-kill--9-and-outages). It returns the function that stops watching.
func drainOnSIGUSR1(srv *dispatch.Server, logger *slog.Logger) func() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			srv.StopLeasing()
			logger.Info("draining (SIGUSR1): no new leases; results of the leases out are still taken; SIGTERM stops the replica",
				"in_flight", srv.InFlight())
		case <-done:
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}
