package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
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

	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/procstat"
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
			"and the replicas' peak RSS, then checks the gates: no task lost, exactly --tasks NoProblem,\n" +
			"every result archive byte-identical to its source. A failed gate exits non-zero. Uses the\n" +
			"database as configured (the embedded one by default), with its durable settings. Its tasks\n" +
			"belong to its own service, bench_echo: unfinished tasks an earlier bench left there (one that\n" +
			"stopped before its backlog drained) are deleted first.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "tasks", Usage: "source archives to stage and convert", Value: 20000, EnvVars: envVars("BENCH_TASKS")},
			&cli.IntFlag{Name: "workers", Usage: "echo workers, each with its own identity", Value: 8, EnvVars: envVars("BENCH_WORKERS")},
			&cli.IntFlag{Name: "replicas", Usage: "replicas sharing the database", Value: 1, EnvVars: envVars("BENCH_REPLICAS")},
			&cli.IntFlag{Name: "payload-kb", Usage: "payload size of each source archive", Value: 8, EnvVars: envVars("BENCH_PAYLOAD_KB")},
			&cli.Float64Flag{Name: "rate", Usage: "hold the workers to this many tasks/s in all (0: as fast as they go)", EnvVars: envVars("BENCH_RATE")},
			&cli.IntFlag{Name: "chaos", Usage: "a saboteur leases this many tasks and dies (the reaper must recover them)", EnvVars: envVars("BENCH_CHAOS")},
			&cli.DurationFlag{Name: "lease-timeout", Usage: "the replicas' --lease-timeout; 0: 5s with --chaos (recovered quickly), else the serve default", EnvVars: envVars("BENCH_LEASE_TIMEOUT")},
			&cli.BoolFlag{Name: "vs-river", Usage: "also run --tasks no-op River jobs on the same database and print the ratio", EnvVars: envVars("BENCH_VS_RIVER")},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON line", EnvVars: envVars("BENCH_JSON")},
			&cli.StringFlag{Name: "dir", Usage: "where to stage the archives, kept afterwards; empty: a temp dir, removed afterwards (on ext4 without a journal, files created among thousands deleted in the last minutes cost up to 40x the CPU: give runs one after another a --dir each)", EnvVars: envVars("BENCH_DIR")},
			&cli.DurationFlag{Name: "deadline", Usage: "give up (a failed gate) after this long", Value: 10 * time.Minute, EnvVars: envVars("BENCH_DEADLINE")},
			&cli.IntFlag{Name: "max-in-flight", Usage: "--max-in-flight of each replica", Value: 5000, EnvVars: envVars("BENCH_MAX_IN_FLIGHT")},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of replica 1 to this file (pprof)", EnvVars: envVars("BENCH_CPUPROFILE")},
			&cli.StringSliceFlag{Name: "serve-flag", Usage: "an extra flag for every replica's serve command, e.g. --serve-flag=--claimers=1 (repeatable)", EnvVars: envVars("BENCH_SERVE_FLAGS")},
		},
		Action: runBench,
	}
}

// benchReport is what a bench run measured.
type benchReport struct {
	Tasks            int     `json:"tasks"`
	Workers          int     `json:"workers"`
	Replicas         int     `json:"replicas"`
	PayloadKB        int     `json:"payload_kb"`
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
	// (this process), PostgreSQL's processes, and the whole machine (kernel threads included).
	CPUMicrosPerTask map[string]float64 `json:"cpu_us_per_task,omitempty"`
	RiverJobsPerS    float64            `json:"river_jobs_per_s,omitempty"`
	RatioVsRiver     float64            `json:"ratio_vs_river,omitempty"`
	NoProblem        int64              `json:"no_problem"`
	Lost             int64              `json:"lost"`
	BadArchives      int                `json:"bad_archives"`
	GatesOK          bool               `json:"gates_ok"`
}

func runBench(c *cli.Context) error {
	tuneGC()
	n, workers, replicas := c.Int("tasks"), c.Int("workers"), c.Int("replicas")
	if n < 1 || workers < 1 || replicas < 1 || c.Int("payload-kb") < 0 || c.Int("chaos") < 0 || c.Int("chaos") > n {
		return usagef(c, "--tasks, --workers and --replicas must be at least 1; --chaos between 0 and --tasks")
	}
	ctx := c.Context
	logf := func(format string, args ...any) {
		if !c.Bool("json") {
			fmt.Fprintf(c.App.Writer, format+"\n", args...)
		}
	}
	dsn, err := databaseURL(c)
	if err != nil {
		return err
	}
	store, closeStore, err := openStore(c, lease.Config{Replica: "bench"})
	if err != nil {
		return err
	}
	defer closeStore()
	svc, err := ensureService(ctx, store, "bench_echo")
	if err != nil {
		return err
	}
	// An earlier bench that stopped before its backlog drained left tasks whose archives are
	// gone; this run's replicas would lease them and wait for the reaper.
	if left, err := store.DiscardUnfinished(ctx, svc.ID); err != nil {
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
	logf("staging %d archives of %d KB in %s", n, c.Int("payload-kb"), dir)
	entries, err := stageCorpus(ctx, dir, n, c.Int("payload-kb")*1024)
	if err != nil {
		return err
	}
	// The staged archives go to disk now, not in the first claims' syncfs: staging is setup.
	syscall.Sync()
	imp, err := store.Import(ctx, lease.ImportRequest{Corpus: name, CorpusPath: dir, ServiceID: svc.ID, Entries: entries})
	if err != nil {
		return err
	}

	// Replicas: subprocesses, so their memory is theirs alone.
	var vents, sinks []string
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
		vp, sp := freePort(), freePort()
		vents = append(vents, fmt.Sprintf("tcp://127.0.0.1:%d", vp))
		sinks = append(sinks, fmt.Sprintf("tcp://127.0.0.1:%d", sp))
		args := []string{"--log-level", "warn", "--database-url", dsn, "serve",
			"--replica", fmt.Sprintf("bench-r%d", i+1), "--ventilator", vents[i], "--sink", sinks[i],
			"--http", "", "--reap-interval", "1s", "--lease-timeout", leaseTimeout,
			"--max-in-flight", strconv.Itoa(c.Int("max-in-flight"))}
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
	start := time.Now()
	cpuStart := sampleCPU(procs)
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
	lastLog, lastPoll := time.Now(), time.Now()
	for {
		// The drain check costs PostgreSQL a scan, which the measurement would include: until
		// the fleet has converted --tasks archives it runs once a second (for the log and the
		// peak in flight), then often. The full tally (Progress) is read once at the end.
		if handler.n.Load() < int64(n) && time.Since(lastPoll) < time.Second &&
			time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		lastPoll = time.Now()
		open, inFlight, err := store.Open(ctx, svc.ID)
		if err != nil {
			return err
		}
		if inFlight > peak.Load() {
			peak.Store(inFlight)
		}
		for _, pr := range procs {
			rssPeak = max(rssPeak, peakRSSMB(pr.Process.Pid))
		}
		if !open || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if time.Since(lastLog) > 5*time.Second {
			logf("  %s: %d in flight", time.Since(start).Round(time.Second), inFlight)
			lastLog = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	cpuEnd := sampleCPU(procs)
	for _, pr := range procs {
		rssPeak = max(rssPeak, peakRSSMB(pr.Process.Pid))
	}
	stopWorkers()
	wErr := <-wDone
	stopReplicas()
	if wErr != nil && !errors.Is(wErr, context.Canceled) {
		return fmt.Errorf("echo workers: %w", wErr)
	}
	var p lease.Progress
	if ps, err := store.Progress(ctx, name, svc.Name); err != nil {
		return err
	} else if len(ps) == 1 {
		p = ps[0]
	}

	rep := benchReport{Tasks: n, Workers: workers, Replicas: replicas, PayloadKB: c.Int("payload-kb"),
		Rate: c.Float64("rate"), Chaos: c.Int("chaos"), Seconds: took.Seconds(),
		PeakInFlight: peak.Load(), ReplicaPeakRSSMB: rssPeak, NoProblem: p.NoProblem,
		NoWorkReplies: stats.Mocks.Load()}
	rep.TasksPerSecond = float64(p.Done()) / took.Seconds()
	if done := p.Done(); done > 0 {
		rep.CPUMicrosPerTask = map[string]float64{}
		for k, v := range cpuEnd {
			rep.CPUMicrosPerTask[k] = math.Round((v-cpuStart[k])*1e6/float64(done)*10) / 10
		}
	}
	rep.MBPerSecond = float64(p.Done()) * float64(c.Int("payload-kb")) / 1024 * 2 / took.Seconds()
	p50, p99, err := store.Latency(ctx, imp.CorpusID)
	if err != nil {
		return err
	}
	rep.P50Millis, rep.P99Millis = float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000
	rep.Lost = int64(n) - p.Done()
	rep.BadArchives, _ = byteIdentical(entries, svc.Name)
	rep.GatesOK = rep.Lost == 0 && p.NoProblem == int64(n) && rep.BadArchives == 0

	if c.Bool("vs-river") {
		jps, err := benchRiver(ctx, dsn, n)
		if err != nil {
			return fmt.Errorf("river: %w", err)
		}
		rep.RiverJobsPerS = jps
		rep.RatioVsRiver = rep.TasksPerSecond / jps
	}

	if c.Bool("json") {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(c.App.Writer, string(b))
	} else {
		logf("%d tasks in %.2fs: %.0f tasks/s, %.1f MB/s; lease→result p50 %.1f ms, p99 %.1f ms; peak in flight %d; replica peak RSS %.0f MB",
			p.Done(), rep.Seconds, rep.TasksPerSecond, rep.MBPerSecond, rep.P50Millis, rep.P99Millis, rep.PeakInFlight, rep.ReplicaPeakRSSMB)
		if rep.RiverJobsPerS > 0 {
			logf("River: %.0f no-op jobs/s; cortexq/River = %.2f", rep.RiverJobsPerS, rep.RatioVsRiver)
		}
		logf("gates: lost %d, NoProblem %d of %d, archives differing %d → %s", rep.Lost, rep.NoProblem, n, rep.BadArchives,
			map[bool]string{true: "ok", false: "FAILED"}[rep.GatesOK])
	}
	if !rep.GatesOK {
		return fmt.Errorf("bench gates failed: lost %d, NoProblem %d of %d, archives differing %d", rep.Lost, rep.NoProblem, n, rep.BadArchives)
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
// throughput) and reports jobs per second.
func benchRiver(ctx context.Context, dsn string, n int) (float64, error) {
	pool, err := newPool(ctx, dsn, 20)
	if err != nil {
		return 0, err
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
		return 0, err
	}
	params := make([]river.InsertManyParams, 0, 1000)
	for i := 0; i < n; i += len(params) {
		params = params[:0]
		for j := i; j < min(n, i+1000); j++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{}, InsertOpts: &river.InsertOpts{Queue: "bench"}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		err = errors.New("river did not finish within 10 minutes")
	}
	took := time.Since(start)
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = client.Stop(sctx)
	if err != nil {
		return 0, err
	}
	return float64(n) / took.Seconds(), nil
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

// peakRSSMB reads a process's peak resident set size (VmHWM) in MB; 0 if unknown.
// sampleCPU reads the CPU seconds spent so far by the replicas, this process (the echo
// workers), PostgreSQL's processes (with their reaped children) and the whole machine (steal
// left out: procstat.Machine).
func sampleCPU(replicas []*exec.Cmd) map[string]float64 {
	machine, _ := procstat.Machine()
	out := map[string]float64{"replicas": 0, "workers": procstat.Process("self"), "postgres": 0, "machine": machine}
	for _, r := range replicas {
		out["replicas"] += procstat.Process(strconv.Itoa(r.Process.Pid))
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		if comm, err := os.ReadFile("/proc/" + d.Name() + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "postgres" {
			out["postgres"] += procstat.Process(d.Name())
		}
	}
	return out
}

func peakRSSMB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
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
