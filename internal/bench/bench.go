package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	zmq "github.com/pebbe/zmq4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/procstat"
	"github.com/cortexq/cortexq/sql/dbsqlc"
	"github.com/cortexq/cortexq/worker"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure durable dispatch end to end, and check that nothing was lost",
		Description: "Stages --tasks sample source archives (valid zips whose cortex.log derives NoProblem), imports\n" +
			"them, starts --replicas replicas (`cortexq serve` subprocesses on loopback) and --workers echo\n" +
			"workers connected to all of them, and drains the backlog. It prints tasks/s, MB/s (source +\n" +
			"result), the p50/p99 time from lease to recorded result, the peak number of leases in flight\n" +
			"and the replicas' peak RSS, the CPU per task of the replicas, the workers, PostgreSQL (the\n" +
			"processes of the cluster serving the database only, found from its data directory; none where\n" +
			"they are out of sight, and it says so) and the machine, and the replicas' average lease and\n" +
			"claim batches (with --vs-river, River's CPU per job beside it), then checks the gates: no task\n" +
			"lost, exactly --tasks NoProblem, every result archive byte-identical to its source. A failed\n" +
			"gate exits non-zero. Uses the\n" +
			"database as configured (the embedded one by default), with its durable settings. Its tasks\n" +
			"belong to its own service, bench_echo: unfinished tasks an earlier bench left there (one that\n" +
			"stopped before its backlog drained) are deleted first.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "tasks", Usage: "source archives to stage and convert", Value: 20000, EnvVars: wired.EnvVars("BENCH_TASKS")},
			&cli.IntFlag{Name: "workers", Usage: "echo workers, each with its own identity", Value: 8, EnvVars: wired.EnvVars("BENCH_WORKERS")},
			&cli.IntFlag{Name: "replicas", Usage: "replicas sharing the database", Value: 1, EnvVars: wired.EnvVars("BENCH_REPLICAS")},
			&cli.IntFlag{Name: "payload-kb", Usage: "payload size of each source archive", Value: 8, EnvVars: wired.EnvVars("BENCH_PAYLOAD_KB")},
			&cli.IntFlag{Name: "messages", Usage: "give each source archive a LaTeXML-shaped cortex.log of about this many messages (loaded bindings, warnings; errors in a third of the tasks: statuses NoProblem, Warning and Error, the same every run); 0: a one-line log, NoProblem", EnvVars: wired.EnvVars("BENCH_MESSAGES")},
			&cli.Float64Flag{Name: "rate", Usage: "hold the workers to this many tasks/s in all (0: as fast as they go)", EnvVars: wired.EnvVars("BENCH_RATE")},
			&cli.IntFlag{Name: "chaos", Usage: "a saboteur leases this many tasks and dies (the reaper must recover them)", EnvVars: wired.EnvVars("BENCH_CHAOS")},
			&cli.DurationFlag{Name: "lease-timeout", Usage: "the replicas' --lease-timeout; 0: 5s with --chaos (recovered quickly), else the serve default", EnvVars: wired.EnvVars("BENCH_LEASE_TIMEOUT")},
			&cli.BoolFlag{Name: "vs-river", Usage: "also run --tasks no-op River jobs on the same database and print the ratio", EnvVars: wired.EnvVars("BENCH_VS_RIVER")},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON line", EnvVars: wired.EnvVars("BENCH_JSON")},
			&cli.StringFlag{Name: "dir", Usage: "where to stage the archives, kept afterwards; empty: a temp dir, removed afterwards (on ext4 without a journal, files created among thousands deleted in the last minutes cost up to 40x the CPU: give runs one after another a --dir each)", EnvVars: wired.EnvVars("BENCH_DIR")},
			&cli.DurationFlag{Name: "deadline", Usage: "give up (a failed gate) after this long", Value: 10 * time.Minute, EnvVars: wired.EnvVars("BENCH_DEADLINE")},
			&cli.IntFlag{Name: "max-in-flight", Usage: "--max-in-flight of each replica", Value: 5000, EnvVars: wired.EnvVars("BENCH_MAX_IN_FLIGHT")},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of replica 1 to this file (pprof)", EnvVars: wired.EnvVars("BENCH_CPUPROFILE")},
			&cli.StringFlag{Name: "corpora", Usage: "TODO tasks per corpus, comma-separated (e.g. 1000000,100): several corpora of the service, served by fair share; the run stops once --tasks are converted, and reports when each corpus finished (archives are staged only for the tasks a run can reach)", EnvVars: wired.EnvVars("BENCH_CORPORA")},
			&cli.StringSliceFlag{Name: "serve-flag", Usage: "an extra flag for every replica's serve command, e.g. --serve-flag=--claimers=1 (repeatable)", EnvVars: wired.EnvVars("BENCH_SERVE_FLAGS")},
		},
		Action: runBench,
	}
}

// Report is what a bench run measured.
type Report struct {
	Tasks     int `json:"tasks"`
	Workers   int `json:"workers"`
	Replicas  int `json:"replicas"`
	PayloadKB int `json:"payload_kb"`
	// Messages is --messages; with it, the statuses the logs derive (each gated) and what the
	// stored messages take, all in, divided by their number (every run's, in the database).
	Messages         int     `json:"messages,omitempty"`
	Warning          int64   `json:"warning,omitempty"`
	Error            int64   `json:"error,omitempty"`
	StoredMessages   int64   `json:"stored_messages,omitempty"`
	BytesPerMessage  float64 `json:"bytes_per_message,omitempty"`
	Rate             float64 `json:"rate,omitempty"`
	Chaos            int     `json:"chaos,omitempty"`
	Seconds          float64 `json:"seconds"`
	TasksPerSecond   float64 `json:"tasks_per_s"`
	MBPerSecond      float64 `json:"mb_per_s"`
	P50Millis        float64 `json:"p50_ms"`
	P99Millis        float64 `json:"p99_ms"`
	PeakInFlight     int64   `json:"peak_in_flight"`
	ReplicaPeakRSSMB float64 `json:"replica_peak_rss_mb"`
	// NoWorkReplies counts the replies that had no task for the fleet ("no work", backpressure):
	// each one costs its worker a throttle pause.
	NoWorkReplies uint64 `json:"no_work_replies"`
	// CPU time per task during the run, in µs, by who spent it: the replicas, the echo workers
	// (this process), PostgreSQL's processes (of its own cluster only, see PostgresCPU; absent
	// when not counted), and the whole machine (kernel threads included).
	CPUMicrosPerTask map[string]float64 `json:"cpu_us_per_task,omitempty"`
	// The report fold of the run's results the replicas had not folded when they stopped, run
	// after the drain: tasks folded, its time and PostgreSQL's CPU per task folded, and the
	// throughput counting its time after the drain's (a bound: a replica folds while it serves).
	FoldTasks                 int64   `json:"fold_tasks"`
	FoldSeconds               float64 `json:"fold_seconds"`
	FoldPostgresMicrosPerTask float64 `json:"fold_postgres_cpu_us_per_task"`
	TasksPerSecondWithFold    float64 `json:"tasks_per_s_with_fold"`
	// PostgresCPU says what cpu_us_per_task's "postgres" counts: the processes of the cluster
	// serving the bench's database (its postmaster and that one's descendants, whatever else on
	// the machine is named postgres), or why nothing is counted (a server out of sight).
	PostgresCPU string `json:"postgres_cpu"`
	// DrainPollMicrosPerTask is the PostgreSQL CPU the bench's own drain checks cost, per task,
	// measured on their connection's backend and left out of cpu_us_per_task's "postgres":
	// they are the measurement's, not cortexq's. A check costs ~40 µs back to back, but
	// 200-500 µs after the backend slept 20 ms to 1 s (a cold wake-up).
	DrainPollMicrosPerTask float64 `json:"drain_poll_pg_cpu_us_per_task"`
	DrainPolls             int     `json:"drain_polls"`
	// The average batch of each kind of write, from the replicas' histograms (sum/count): tasks
	// per reservation, hand-outs per attribution statement, replies per claim (benchBatches).
	ReserveBatchAvg   float64 `json:"reserve_batch_avg,omitempty"`
	AttributeBatchAvg float64 `json:"attribute_batch_avg,omitempty"`
	ClaimBatchAvg     float64 `json:"claim_batch_avg,omitempty"`
	// AttributedAtClaim is the share of hand-outs whose attempt the claim of their result
	// recorded, with no attribution statement (a result back within the attribution delay).
	AttributedAtClaim float64 `json:"attributed_at_claim"`
	RiverJobsPerS     float64 `json:"river_jobs_per_s,omitempty"`
	// River's CPU per no-op job, in µs, counted as cpu_us_per_task is during River's run: its
	// client (this process), PostgreSQL (the same cluster) and the machine.
	RiverCPUMicrosPerJob map[string]float64 `json:"river_cpu_us_per_job,omitempty"`
	RatioVsRiver         float64            `json:"ratio_vs_river,omitempty"`
	// Corpora is, with --corpora, each corpus's tasks and when it finished.
	Corpora     []benchCorpusReport `json:"corpora,omitempty"`
	NoProblem   int64               `json:"no_problem"`
	Lost        int64               `json:"lost"`
	BadArchives int                 `json:"bad_archives"`
	GatesOK     bool                `json:"gates_ok"`
}

func runBench(c *cli.Context) error {
	wired.TuneGC()
	n, workers, replicas := c.Int("tasks"), c.Int("workers"), c.Int("replicas")
	if n < 1 || workers < 1 || replicas < 1 || c.Int("payload-kb") < 0 || c.Int("chaos") < 0 || c.Int("chaos") > n {
		return wired.Usagef(c, "--tasks, --workers and --replicas must be at least 1; --chaos between 0 and --tasks")
	}
	messages := c.Int("messages")
	if messages < 0 || messages > 100000 {
		return wired.Usagef(c, "--messages must be between 0 and 100000")
	}
	if messages > 0 && c.String("corpora") != "" {
		return wired.Usagef(c, "--messages and --corpora do not go together")
	}
	var counts []int
	if s := c.String("corpora"); s != "" {
		var err error
		if counts, err = parseCorpora(s); err != nil {
			return wired.Usagef(c, "%v", err)
		}
		total := 0
		for _, k := range counts {
			total += k
		}
		if n > total {
			return wired.Usagef(c, "--tasks %d: more than the %d tasks of --corpora", n, total)
		}
		if c.Int("chaos") > 0 {
			return wired.Usagef(c, "--chaos and --corpora do not go together")
		}
	}
	ctx := c.Context
	logf := func(format string, args ...any) {
		if !c.Bool("json") {
			fmt.Fprintf(c.App.Writer, format+"\n", args...)
		}
	}
	dsn, err := wired.DatabaseURL(c)
	if err != nil {
		return err
	}
	root, closeStore, err := wired.OpenBase(c)
	if err != nil {
		return err
	}
	defer closeStore()
	// The bench's own polls go through one connection of their own, whose backend's CPU tells
	// what they cost; it also finds the cluster whose CPU is counted.
	pollPool, err := newPool(ctx, dsn, 1)
	if err != nil {
		return err
	}
	defer pollPool.Close()
	poll := base.New(pollPool, nil, slog.Default())
	cluster := findCluster(ctx, pollPool, c.String(wired.DatabaseURLFlag) != "")
	pollCPU := func() float64 {
		if !cluster.counted() {
			return 0
		}
		return procstat.Runtime(cluster.backend)
	}
	svc, err := EnsureService(ctx, root, "bench_echo")
	if err != nil {
		return err
	}
	// An earlier bench that stopped before its backlog drained left tasks whose archives are
	// gone; this run's replicas would lease them and wait for the reaper.
	if left, err := benchDiscardUnfinished(ctx, root.Pool, svc.ID); err != nil {
		return err
	} else if left > 0 {
		slog.Warn("deleted unfinished tasks an earlier bench left", "service", svc.Name, "tasks", left)
	}
	dir := c.String("dir")
	if dir == "" {
		dir, err = os.MkdirTemp("", "cortexq-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	name := "bench-" + time.Now().Format("20060102-150405.000")
	dir = filepath.Join(dir, name)
	var entries []string
	var imp catalog.ImportSummary
	var corpora []benchCorpus
	if counts != nil {
		// The tasks a run can reach: those it converts, and what the replicas may hold besides.
		reach := n + replicas*c.Int("max-in-flight")
		corpora, entries, err = stageCorpora(ctx, root, svc, dir, name, counts, reach, c.Int("payload-kb")*1024, logf)
		if err != nil {
			return err
		}
		imp.CorpusID = corpora[0].id
		// What is left of the backlogs goes when the run is over.
		defer func() {
			if left, err := benchDiscardUnfinished(context.WithoutCancel(ctx), root.Pool, svc.ID); err != nil {
				slog.Warn("unfinished tasks of the bench not deleted", "error", err)
			} else {
				logf("deleted the %d unfinished tasks of the run", left)
			}
		}()
		syscall.Sync()
	} else {
		logf("staging %d archives of %d KB in %s", n, c.Int("payload-kb"), dir)
		entries, err = stageCorpusLogs(ctx, dir, n, c.Int("payload-kb")*1024, messages)
		if err != nil {
			return err
		}
		// The staged archives go to disk now, not in the first claims' syncfs: staging is setup.
		syscall.Sync()
		imp, err = root.Catalog.Import(ctx, catalog.ImportRequest{Corpus: name, CorpusPath: dir, ServiceID: svc.ID, Entries: entries})
		if err != nil {
			return err
		}
	}

	// The report changes earlier runs left unfolded (a replica folds every --fold-interval, and
	// the last changes of a run outlive it) are folded now, before the clock starts: otherwise
	// this run's leader folds them at its start, inside the measurement, and a run after one
	// with big logs pays for that one's fold.
	if left, err := root.Reports.FoldAll(ctx, 0); err != nil {
		return fmt.Errorf("fold what earlier runs left: %w", err)
	} else if left.Tasks > 0 {
		logf("folded the report changes of %d tasks earlier runs left, before the clock starts", left.Tasks)
	}

	// Replicas: subprocesses, so their memory is theirs alone.
	var vents, sinks, metricsURLs []string
	var procs []*exec.Cmd
	leaseTimeout := lease.LeaseTimeoutDefault.String()
	if c.Int("chaos") > 0 {
		leaseTimeout = "5s"
	}
	if d := c.Duration("lease-timeout"); d > 0 {
		leaseTimeout = d.String()
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for i := range replicas {
		vp, sp, hp := freePort(), freePort(), freePort()
		vents = append(vents, fmt.Sprintf("tcp://127.0.0.1:%d", vp))
		sinks = append(sinks, fmt.Sprintf("tcp://127.0.0.1:%d", sp))
		httpAddr := fmt.Sprintf("127.0.0.1:%d", hp)
		metricsURLs = append(metricsURLs, "http://"+httpAddr+"/metrics")
		args := []string{"--log-level", "warn", "--database-url", dsn, "serve",
			"--replica", fmt.Sprintf("bench-r%d", i+1), "--ventilator", vents[i], "--sink", sinks[i],
			"--http", httpAddr, "--reap-interval", "1s", "--lease-timeout", leaseTimeout,
			"--max-in-flight", strconv.Itoa(c.Int("max-in-flight")),
			// The staged corpus is new: the start-up sweep, a one-off walk of every corpus
			// (~0.9 s of CPU for 20,000 entries), would be counted as dispatch work per task.
			"--sweep-at-start=false"}
		args = append(args, c.StringSlice("serve-flag")...)
		cmd := exec.Command(self, args...)
		cmd.Stderr = os.Stderr
		if i == 0 && c.String("cpuprofile") != "" {
			cmd.Env = append(os.Environ(), "CORTEXQ_CPUPROFILE="+c.String("cpuprofile"))
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start replica: %w", err)
		}
		procs = append(procs, cmd)
	}
	stopReplicas := func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}
	defer stopReplicas()
	for i := range replicas {
		if err := waitListening(ctx, vents[i], 30*time.Second); err != nil {
			return fmt.Errorf("replica %d: %w", i+1, err)
		}
	}

	if k := c.Int("chaos"); k > 0 {
		if err := saboteur(vents[0], svc.Name, k); err != nil {
			return fmt.Errorf("saboteur: %w", err)
		}
		logf("saboteur leased %d tasks and vanished", k)
	}

	quiet := slog.New(slog.DiscardHandler)
	var inner worker.MemoryHandler = worker.Echo{}
	if r := c.Float64("rate"); r > 0 {
		inner = &paced{next: time.Now(), every: time.Duration(float64(time.Second) / r)}
	}
	handler := &counted{next: inner}
	runCtx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	// A new backend's first statements load its catalog caches and plan (milliseconds): that is
	// setup, not the polls' cost, so the poll runs once before the measurement starts.
	if _, err := benchOpen(ctx, pollPool, svc.ID); err != nil {
		return err
	}
	dbStart, err := root.Now(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	cpuStart := sampleCPU(procs, cluster)
	pollCPUStart := pollCPU()
	var stats worker.Stats
	wDone := make(chan error, 1)
	go func() {
		wDone <- worker.Run(runCtx, worker.Config{
			Ventilator: strings.Join(vents, ","), Sink: strings.Join(sinks, ","), Service: svc.Name,
			Identity:    fmt.Sprintf("bench-fleet:%s:%d", svc.Name, os.Getpid()),
			Concurrency: workers, Throttle: 20 * time.Millisecond, IOTimeout: 10 * time.Second,
			Backoff: 100 * time.Millisecond, Logger: quiet, TempDir: scratchDir(), Stats: &stats,
		}, handler)
	}()

	var peak atomic.Int64
	var rssPeak float64
	deadline := time.Now().Add(c.Duration("deadline"))
	lastLog, lastCount := time.Now(), time.Now()
	polls := 0
	var doneAtStop int64 // --corpora: the results recorded when the measurement stopped
	for {
		// The drain check (BenchOpen, two index probes) costs PostgreSQL CPU, which the
		// measurement includes (DrainPollMicrosPerTask says how much): it runs once a second,
		// and every 20 ms once the fleet has converted --tasks archives. The leases in flight
		// (for the log and the peak) come from the replicas' cortexq_in_flight gauges, not a
		// count in the database, whose index scan passes over the entries of every row that left
		// in flight since the last vacuum. The full tally (Progress) is read once at the end.
		everySecond := time.Since(lastCount) >= time.Second
		if everySecond {
			lastCount = time.Now()
			inFlight := int64(readMetrics(metricsURLs, "cortexq_in_flight")["cortexq_in_flight"])
			if inFlight > peak.Load() {
				peak.Store(inFlight)
			}
			for _, pr := range procs {
				rssPeak = max(rssPeak, peakRSSMB(pr.Process.Pid))
			}
			if time.Since(lastLog) > 5*time.Second {
				logf("  %s: %d in flight", time.Since(start).Round(time.Second), inFlight)
				lastLog = time.Now()
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if corpora != nil && handler.n.Load() >= int64(n) {
			// A --corpora run stops once --tasks results are recorded.
			polls++
			done, err := corporaDone(ctx, poll, svc, corpora, dbStart)
			if err != nil {
				return err
			}
			if done >= int64(n) {
				doneAtStop = done
				break
			}
		} else if corpora == nil && (everySecond || handler.n.Load() >= int64(n)) {
			polls++
			open, err := benchOpen(ctx, pollPool, svc.ID)
			if err != nil {
				return err
			}
			if !open {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	cpuEnd := sampleCPU(procs, cluster)
	pollCPUEnd := pollCPU()
	for _, pr := range procs {
		rssPeak = max(rssPeak, peakRSSMB(pr.Process.Pid))
	}
	var batches map[string]float64
	var wErr error
	if corpora != nil {
		// Leases are still out: the replicas drain them with the workers running.
		batches = readBatches(metricsURLs)
		stopReplicas()
		stopWorkers()
		wErr = <-wDone
	} else {
		stopWorkers()
		wErr = <-wDone
		batches = readBatches(metricsURLs)
		stopReplicas()
	}
	if wErr != nil && !errors.Is(wErr, context.Canceled) {
		return fmt.Errorf("echo workers: %w", wErr)
	}
	// The report fold of this run's results is deferred work (a replica folds every
	// --fold-interval), but it is work each task costs: what the replicas had not folded when
	// they stopped is folded now, and measured apart.
	foldCPUStart, foldStart := sampleCPU(nil, cluster), time.Now()
	folded, err := root.Reports.FoldPending(ctx, 0)
	if err != nil {
		return fmt.Errorf("fold the run's results: %w", err)
	}
	foldTook, foldCPU := time.Since(foldStart), perUnit(foldCPUStart, sampleCPU(nil, cluster), max(folded.Tasks, 1))
	if folded.Tasks == 0 {
		foldCPU = nil
	}
	var p inspect.Progress
	if ps, err := root.Inspect.Progress(ctx, "", svc.Name); err != nil {
		return err
	} else {
		p = sumProgress(ps, name, corpora)
	}

	rep := Report{Tasks: n, Workers: workers, Replicas: replicas, PayloadKB: c.Int("payload-kb"),
		Rate: c.Float64("rate"), Chaos: c.Int("chaos"), Seconds: took.Seconds(),
		PeakInFlight: peak.Load(), ReplicaPeakRSSMB: rssPeak, NoProblem: p.NoProblem,
		NoWorkReplies: stats.Mocks.Load(), Messages: messages, Warning: p.Warning, Error: p.Error}
	measured := p.Done()
	if corpora != nil {
		// Tasks the workers converted after the measurement stopped (the replicas drain their
		// leases with the workers running) are not counted.
		measured = doneAtStop
	}
	rep.TasksPerSecond = float64(measured) / took.Seconds()
	rep.FoldTasks, rep.FoldSeconds = folded.Tasks, foldTook.Seconds()
	rep.FoldPostgresMicrosPerTask = foldCPU["postgres"]
	rep.TasksPerSecondWithFold = float64(measured) / (took + foldTook).Seconds()
	rep.PostgresCPU, rep.DrainPolls = cluster.String(), polls
	rep.ReserveBatchAvg, rep.AttributeBatchAvg, rep.ClaimBatchAvg = batches["reserve"], batches["attribute"], batches["claim"]
	rep.AttributedAtClaim = batches["attributed_at_claim"]
	if done := measured; done > 0 {
		rep.CPUMicrosPerTask = perUnit(cpuStart, cpuEnd, done)
		if cluster.counted() {
			rep.DrainPollMicrosPerTask = math.Round((pollCPUEnd-pollCPUStart)*1e6/float64(done)*10) / 10
			if pg, ok := rep.CPUMicrosPerTask["postgres"]; ok {
				rep.CPUMicrosPerTask["postgres"] = math.Round((pg-rep.DrainPollMicrosPerTask)*10) / 10
			}
		}
	}
	rep.MBPerSecond = float64(measured) * float64(c.Int("payload-kb")) / 1024 * 2 / took.Seconds()
	p50, p99, err := root.Inspect.Latency(ctx, imp.CorpusID)
	if err != nil {
		return err
	}
	rep.P50Millis, rep.P99Millis = float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000
	rep.Lost = int64(n) - p.Done()
	if corpora == nil {
		rep.BadArchives, _ = ByteIdentical(entries, svc.Name)
		// Each task's status is the one its log derives.
		var want [3]int64
		for i := range n {
			switch benchLogStatus(i, messages) {
			case queue.StatusNoProblem:
				want[0]++
			case queue.StatusWarning:
				want[1]++
			default:
				want[2]++
			}
		}
		rep.GatesOK = rep.Lost == 0 && p.NoProblem == want[0] && p.Warning == want[1] && p.Error == want[2] && rep.BadArchives == 0
		if messages > 0 {
			st, err := dbsqlc.New(root.Pool).BenchMessageStorage(ctx)
			if err != nil {
				return pgErr("message storage", err)
			}
			rep.StoredMessages = st.Messages
			if st.Messages > 0 {
				rep.BytesPerMessage = math.Round(float64(st.Bytes)/float64(st.Messages)*10) / 10
			}
		}
	} else {
		// At least --tasks converted, each NoProblem, each result identical to its source.
		var results int
		rep.BadArchives, results = resultsIdentical(entries, svc.Name)
		rep.Lost = max(0, rep.Lost)
		rep.GatesOK = p.Done() >= int64(n) && p.NoProblem == p.Done() && int64(results) >= p.NoProblem && rep.BadArchives == 0
		if rep.Corpora, err = reportCorpora(ctx, root, svc, corpora, dbStart); err != nil {
			return err
		}
	}

	if c.Bool("vs-river") {
		jps, cpu, err := benchRiver(ctx, dsn, n, cluster)
		if err != nil {
			return fmt.Errorf("river: %w", err)
		}
		rep.RiverJobsPerS, rep.RiverCPUMicrosPerJob = jps, cpu
		rep.RatioVsRiver = rep.TasksPerSecond / jps
	}

	if c.Bool("json") {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(c.App.Writer, string(b))
	} else {
		logf("%d tasks in %.2fs: %.0f tasks/s, %.1f MB/s; lease→result p50 %.1f ms, p99 %.1f ms; peak in flight %d; replica peak RSS %.0f MB",
			measured, rep.Seconds, rep.TasksPerSecond, rep.MBPerSecond, rep.P50Millis, rep.P99Millis, rep.PeakInFlight, rep.ReplicaPeakRSSMB)
		logf("CPU per task (µs): %s; average batch: reserve %.1f, attribute %.1f, claim %.1f; %.0f%% of hand-outs attributed by their claim",
			formatCPU(rep.CPUMicrosPerTask), rep.ReserveBatchAvg, rep.AttributeBatchAvg, rep.ClaimBatchAvg, 100*rep.AttributedAtClaim)
		logf("PostgreSQL CPU: %s; the bench's own %d drain checks cost it %.1f µs/task more, left out", rep.PostgresCPU, rep.DrainPolls, rep.DrainPollMicrosPerTask)
		logf("report fold after the drain: %d tasks the replicas had not folded, in %.2fs (PostgreSQL %.0f µs/task); with it %.0f tasks/s",
			rep.FoldTasks, rep.FoldSeconds, rep.FoldPostgresMicrosPerTask, rep.TasksPerSecondWithFold)
		if rep.RiverJobsPerS > 0 {
			logf("River: %.0f no-op jobs/s; cortexq/River = %.2f", rep.RiverJobsPerS, rep.RatioVsRiver)
			if pg, ok := rep.RiverCPUMicrosPerJob["postgres"]; ok {
				logf("PostgreSQL CPU: cortexq %.1f µs/task, River %.1f µs/job (cortexq/River = %.2f)",
					rep.CPUMicrosPerTask["postgres"], pg, rep.CPUMicrosPerTask["postgres"]/pg)
			}
		}
		for _, bc := range rep.Corpora {
			finished := "not finished"
			if bc.FinishedSeconds != nil {
				finished = fmt.Sprintf("finished at %.2f s", *bc.FinishedSeconds)
			}
			logf("corpus %s: %d of %d tasks NoProblem, %s", bc.Name, bc.NoProblem, bc.Tasks, finished)
		}
		if messages > 0 {
			logf("messages: about %d a log; %d stored in all, %.1f bytes each (tables, indexes, TOAST)", messages, rep.StoredMessages, rep.BytesPerMessage)
			logf("gates: lost %d, NoProblem %d, Warning %d, Error %d of %d, as the logs say; archives differing %d → %s",
				rep.Lost, rep.NoProblem, rep.Warning, rep.Error, n, rep.BadArchives, map[bool]string{true: "ok", false: "FAILED"}[rep.GatesOK])
		} else {
			logf("gates: lost %d, NoProblem %d of %d, archives differing %d → %s", rep.Lost, rep.NoProblem, n, rep.BadArchives,
				map[bool]string{true: "ok", false: "FAILED"}[rep.GatesOK])
		}
	}
	if !rep.GatesOK {
		return fmt.Errorf("bench gates failed: lost %d, NoProblem %d, Warning %d, Error %d of %d, archives differing %d", rep.Lost, rep.NoProblem, rep.Warning, rep.Error, n, rep.BadArchives)
	}
	return nil
}

// counted is the bench fleet's handler: it counts the conversions, which tells the drain check
// when to start polling the database.
type counted struct {
	next worker.MemoryHandler
	n    atomic.Int64
}

func (h *counted) Convert(ctx context.Context, in, out string) error {
	h.n.Add(1)
	return h.next.Convert(ctx, in, out)
}

func (h *counted) ConvertBytes(ctx context.Context, in []byte) ([]byte, error) {
	h.n.Add(1)
	return h.next.ConvertBytes(ctx, in)
}

// pacedSlack is how far behind its schedule a paced fleet may catch up.
const pacedSlack = 100 * time.Millisecond

// paced is an echo handler held to a shared rate.
type paced struct {
	mu    sync.Mutex
	next  time.Time
	every time.Duration
}

func (h *paced) Convert(ctx context.Context, in, out string) error {
	if err := h.wait(ctx); err != nil {
		return err
	}
	return worker.Echo{}.Convert(ctx, in, out)
}

func (h *paced) ConvertBytes(ctx context.Context, in []byte) ([]byte, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return in, nil
}

// wait holds the caller to its turn.
func (h *paced) wait(ctx context.Context) error {
	h.mu.Lock()
	// The schedule starts at the first call: from the zero time the floor below would let the
	// first pacedSlack of slots go at once, a burst of 100 tasks at 1,000/s that the run's
	// lease → result tail then measured (docs/performance.md#latency-at-a-steady-rate).
	if h.next.IsZero() {
		h.next = time.Now()
	}
	// Slots missed by less than pacedSlack are caught up, so a short stall does not lower the
	// rate held; older ones are dropped, so a long one does not turn into a burst.
	if floor := time.Now().Add(-pacedSlack); h.next.Before(floor) {
		h.next = floor
	}
	at := h.next
	h.next = h.next.Add(h.every)
	h.mu.Unlock()
	if d := time.Until(at); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// saboteur leases k tasks, each on a raw DEALER of its own (a worker may hold only
// --max-in-flight-per-worker leases), reads their payloads and vanishes.
func saboteur(vent, service string, k int) error {
	for i := range k {
		if err := leaseAndVanish(vent, service, fmt.Sprintf("chaos-saboteur-%d-%d", os.Getpid(), i)); err != nil {
			return err
		}
	}
	return nil
}

// leaseAndVanish leases one task as worker identity and reads its payload.
func leaseAndVanish(vent, service, identity string) error {
	d, err := zmq.NewSocket(zmq.DEALER)
	if err != nil {
		return err
	}
	defer d.Close()
	_ = d.SetLinger(0)
	_ = d.SetIdentity(identity)
	_ = d.SetRcvtimeo(10 * time.Second)
	if err := d.Connect(vent); err != nil {
		return err
	}
	for {
		if _, err := d.Send(service, 0); err != nil {
			return err
		}
		msg, err := d.RecvMessageBytes(0)
		if err != nil {
			return err
		}
		if string(msg[0]) != "0" {
			return nil
		}
	}
}

// benchRiver runs n no-op River jobs on the database (River tuned as its authors tune it for
// throughput) and reports jobs per second and the CPU per job in µs, counted as the cortexq
// run's is (sampleCPU): its client is this process.
func benchRiver(ctx context.Context, dsn string, n int, cluster pgCluster) (float64, map[string]float64, error) {
	pool, err := newPool(ctx, dsn, 20)
	if err != nil {
		return 0, nil, err
	}
	defer pool.Close()
	var done atomic.Int64
	finished := make(chan struct{})
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[noopArgs]) error {
		if done.Add(1) == int64(n) {
			close(finished)
		}
		return nil
	}))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:        map[string]river.QueueConfig{"bench": {MaxWorkers: 2000}},
		Workers:       workers,
		FetchCooldown: time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return 0, nil, err
	}
	params := make([]river.InsertManyParams, 0, 1000)
	for i := 0; i < n; i += len(params) {
		params = params[:0]
		for j := i; j < min(n, i+1000); j++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{}, InsertOpts: &river.InsertOpts{Queue: "bench"}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return 0, nil, err
		}
	}
	start := time.Now()
	cpuStart := sampleCPU(nil, cluster)
	if err := client.Start(ctx); err != nil {
		return 0, nil, err
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		err = errors.New("river did not finish within 10 minutes")
	}
	took := time.Since(start)
	cpu := perUnit(cpuStart, sampleCPU(nil, cluster), int64(n))
	cpu["client"] = cpu["workers"]
	delete(cpu, "workers")
	delete(cpu, "replicas")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = client.Stop(sctx)
	if err != nil {
		return 0, nil, err
	}
	return float64(n) / took.Seconds(), cpu, nil
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "cortexq_bench_noop" }

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListening waits until something accepts TCP connections at a tcp:// endpoint.
func waitListening(ctx context.Context, endpoint string, timeout time.Duration) error {
	addr := strings.TrimPrefix(endpoint, "tcp://")
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nothing listens on %s after %s", endpoint, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sampleCPU reads the CPU seconds spent so far by the replicas, this process (the echo
// workers), the PostgreSQL cluster's processes (with their reaped children; only when it is
// counted) and the whole machine (steal left out: procstat.Machine).
func sampleCPU(replicas []*exec.Cmd, cluster pgCluster) map[string]float64 {
	machine, _ := procstat.Machine()
	out := map[string]float64{"replicas": 0, "workers": procstat.Process("self"), "machine": machine}
	for _, r := range replicas {
		out["replicas"] += procstat.Process(strconv.Itoa(r.Process.Pid))
	}
	if cluster.counted() {
		// Backends that exit meanwhile are in the postmaster's reaped children's time.
		if pids, err := procstat.ClusterPIDs(cluster.postmaster); err == nil {
			out["postgres"] = procstat.Processes(pids)
		}
	}
	return out
}

// perUnit is the CPU between two samples in µs per unit of work, to a tenth.
func perUnit(start, end map[string]float64, units int64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range end {
		if s, ok := start[k]; ok {
			out[k] = math.Round((v-s)*1e6/float64(units)*10) / 10
		}
	}
	return out
}

// formatCPU prints a cpu_us_per_task map in a fixed order.
func formatCPU(m map[string]float64) string {
	var parts []string
	for _, k := range []string{"postgres", "replicas", "workers", "machine"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// pgCluster is the PostgreSQL cluster whose processes the bench counts, or why it counts none.
type pgCluster struct {
	dataDir    string
	postmaster int
	backend    int    // the pid of the connection that found it (the bench's polls)
	why        string // set when nothing is counted
	external   bool   // the database came from --database-url
}

func (pc pgCluster) counted() bool { return pc.why == "" }

// String says what the bench's PostgreSQL CPU counts.
func (pc pgCluster) String() string {
	src := "the embedded cluster"
	if pc.external {
		src = "the --database-url server"
	}
	if !pc.counted() {
		return "not counted: " + pc.why
	}
	return fmt.Sprintf("%s's processes only (postmaster pid %d, data directory %s)", src, pc.postmaster, pc.dataDir)
}

// findCluster finds the processes of the cluster serving pool's database: the postmaster named
// by the postmaster.pid in its data directory, checked to be the parent of pool's own backend
// (so a server in another machine, container or pid namespace is not mistaken for a local
// process). Where that cannot be done, nothing is counted, and the reason says why.
func findCluster(ctx context.Context, pool *pgxpool.Pool, external bool) pgCluster {
	pc := pgCluster{external: external}
	if err := pool.QueryRow(ctx, "SELECT current_setting('data_directory'), pg_backend_pid()").Scan(&pc.dataDir, &pc.backend); err != nil {
		pc.why = fmt.Sprintf("the server does not tell its data directory (%v)", err)
		return pc
	}
	pm, err := procstat.Postmaster(pc.dataDir)
	if err != nil {
		pc.why = fmt.Sprintf("the server's processes are out of sight (%v)", err)
		return pc
	}
	if parent := procstat.Parent(pc.backend); parent != pm {
		pc.why = fmt.Sprintf("the server's processes are out of sight (backend %d's parent is %d, not the postmaster %d of %s)",
			pc.backend, parent, pm, pc.dataDir)
		return pc
	}
	pc.postmaster = pm
	return pc
}

// benchBatches are the replicas' batch histograms the bench averages, by the name its report
// gives them.
var benchBatches = map[string]string{"reserve": "cortexq_reserve_batch_size", "attribute": "cortexq_attribute_batch_size",
	"claim": "cortexq_claim_batch_size"}

// readBatches averages each histogram of benchBatches over the replicas (sum over count), from
// their /metrics, and gives the share of leases attributed by their claim as
// "attributed_at_claim". /metrics answers from a gathering up to metricsMaxAge old: it waits
// that long first, so the run's last transactions are in.
func readBatches(urls []string) map[string]float64 {
	time.Sleep(wired.MetricsMaxAge + 100*time.Millisecond)
	names := []string{"cortexq_attributed_at_claim_total", "cortexq_leases_total"}
	for _, h := range benchBatches {
		names = append(names, h+"_sum", h+"_count")
	}
	m := readMetrics(urls, names...)
	out := map[string]float64{}
	for k, h := range benchBatches {
		if m[h+"_count"] > 0 {
			out[k] = math.Round(m[h+"_sum"]/m[h+"_count"]*10) / 10
		}
	}
	if leases := m["cortexq_leases_total"]; leases > 0 {
		out["attributed_at_claim"] = math.Round(m["cortexq_attributed_at_claim_total"]/leases*1000) / 1000
	}
	return out
}

// readMetrics sums the samples of the named metrics (all their labels) over the replicas'
// /metrics. A replica that does not answer is left out.
func readMetrics(urls []string, names ...string) map[string]float64 {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, u := range urls {
		resp, err := client.Get(u)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			sp := strings.LastIndexByte(line, ' ')
			if sp < 0 || strings.HasPrefix(line, "#") {
				continue
			}
			name, _, _ := strings.Cut(line[:sp], "{")
			if !want[name] {
				continue
			}
			if v, err := strconv.ParseFloat(line[sp+1:], 64); err == nil {
				out[name] += v
			}
		}
		resp.Body.Close()
	}
	return out
}

// peakRSSMB reads a process's peak resident set size (VmHWM) in MB; 0 if unknown.
func peakRSSMB(pid int) float64 {
	hwm, err := procstat.StatusBytes(pid, "VmHWM")
	if err != nil {
		return 0
	}
	return float64(hwm) / (1 << 20)
}

// newPool opens a pool of at most size connections on dsn.
func newPool(ctx context.Context, dsn string, size int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	cfg.MaxConns = size
	return pgxpool.NewWithConfig(ctx, cfg)
}

// scratchDir is where the bench's workers keep their per-task files: RAM (/dev/shm) when the
// machine has it, as a conversion fleet would, so the numbers measure the dispatcher, not the
// workers' disk.
func scratchDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// sumProgress is the bench's corpus's tally, or with --corpora the sum of its corpora's.
func sumProgress(ps []inspect.Progress, name string, corpora []benchCorpus) inspect.Progress {
	var sum inspect.Progress
	for _, p := range ps {
		mine := corpora == nil && p.Corpus == name
		for _, bc := range corpora {
			mine = mine || p.CorpusID == bc.id
		}
		if !mine {
			continue
		}
		sum.Tasks, sum.TODO, sum.Dispatched = sum.Tasks+p.Tasks, sum.TODO+p.TODO, sum.Dispatched+p.Dispatched
		sum.NoProblem, sum.Warning, sum.Error = sum.NoProblem+p.NoProblem, sum.Warning+p.Warning, sum.Error+p.Error
		sum.Fatal, sum.Invalid, sum.Blocked = sum.Fatal+p.Fatal, sum.Invalid+p.Invalid, sum.Blocked+p.Blocked
	}
	return sum
}
