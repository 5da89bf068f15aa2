package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/procstat"
	"github.com/cortexq/cortexq/sql/dbsqlc"
	"github.com/cortexq/cortexq/worker"
)

// runBench is `cortexq bench`: a benchRun taken through its phases in order.
func runBench(c *cli.Context) error {
	wired.TuneGC()
	r, err := newBenchRun(c)
	if err != nil {
		return err
	}
	defer r.cleanUp()
	for _, phase := range []func() error{r.open, r.stage, r.startReplicas, r.pin, r.drain, r.stop, r.fold, r.gates, r.stages, r.vsRiver} {
		if err := phase(); err != nil {
			return err
		}
	}
	r.print()
	if !r.rep.GatesOK {
		rep := r.rep
		return fmt.Errorf("bench gates failed: lost %d, NoProblem %d, Warning %d, Error %d of %d, archives differing %d",
			rep.Lost, rep.NoProblem, rep.Warning, rep.Error, rep.Tasks, rep.BadArchives)
	}
	return nil
}

// benchRun is one bench run: its settings, what its phases set up, and what they measured.
// Each phase is a method; cleanUp undoes what they set up, last first.
type benchRun struct {
	c   *cli.Context
	ctx context.Context
	// The settings: --tasks, --workers, --replicas, --messages, --corpora's counts (nil without).
	n, workers, replicas, messages int
	counts                         []int
	undo                           []func()

	// open: the database, and the bench's own poll connection (its backend's CPU is the polls').
	dsn      string
	root     *base.Base
	pollPool *pgxpool.Pool
	poll     *base.Base
	cluster  pgCluster
	svc      catalog.Service

	// stage: the run's corpus (or corpora) and its archives.
	name    string
	entries []string
	imp     catalog.ImportSummary
	corpora []benchCorpus

	// startReplicas: the replicas, subprocesses so that their memory is theirs alone, and the
	// connection string they are given (through --db-latency's proxy, if set).
	serveDSN                  string
	vents, sinks, metricsURLs []string
	procs                     []*exec.Cmd

	// drain: the fleet and what the measurement took.
	stats       worker.Stats
	handler     *counted
	stopWorkers context.CancelFunc
	workersDone chan error
	dbStart     time.Time
	took        time.Duration
	cpu         [2]map[string]float64 // at the start and the end of the measurement
	pollSecs    [2]float64            // the poll connection's backend's CPU, likewise
	peak        int64
	rssPeak     float64
	polls       int
	doneAtStop  int64 // --corpora: the results recorded when the measurement stopped
	measured    int64 // the results the measurement counts
	batches     map[string]float64
	statements  []StatementStat // --statements
	pinPlan     *pinPlan        // --pin
	pinned      string          // --pin: what was pinned where

	rep Report
}

// newBenchRun reads and checks the flags.
func newBenchRun(c *cli.Context) (*benchRun, error) {
	r := &benchRun{c: c, ctx: c.Context, n: c.Int("tasks"), workers: c.Int("workers"), replicas: c.Int("replicas"), messages: c.Int("messages")}
	if r.n < 1 || r.workers < 1 || r.replicas < 1 || c.Int("payload-kb") < 0 || c.Int("chaos") < 0 || c.Int("chaos") > r.n {
		return nil, wired.Usagef(c, "--tasks, --workers and --replicas must be at least 1; --chaos between 0 and --tasks")
	}
	if r.messages < 0 || r.messages > 100000 {
		return nil, wired.Usagef(c, "--messages must be between 0 and 100000")
	}
	s := c.String("corpora")
	if s == "" {
		return r, nil
	}
	if r.messages > 0 {
		return nil, wired.Usagef(c, "--messages and --corpora do not go together")
	}
	var err error
	if r.counts, err = parseCorpora(s); err != nil {
		return nil, wired.Usagef(c, "%v", err)
	}
	total := 0
	for _, k := range r.counts {
		total += k
	}
	if r.n > total {
		return nil, wired.Usagef(c, "--tasks %d: more than the %d tasks of --corpora", r.n, total)
	}
	if c.Int("chaos") > 0 {
		return nil, wired.Usagef(c, "--chaos and --corpora do not go together")
	}
	return r, nil
}

// deferUndo queues f for cleanUp.
func (r *benchRun) deferUndo(f func()) { r.undo = append(r.undo, f) }

// cleanUp undoes what the phases set up, last first.
func (r *benchRun) cleanUp() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
}

// logf prints a progress line, unless --json.
func (r *benchRun) logf(format string, args ...any) {
	if !r.c.Bool("json") {
		fmt.Fprintf(r.c.App.Writer, format+"\n", args...)
	}
}

// open connects to the database, finds the cluster whose CPU is counted, and makes the bench's
// service, with what an earlier bench left unfinished deleted.
func (r *benchRun) open() error {
	var err error
	if r.dsn, err = wired.DatabaseURL(r.c); err != nil {
		return err
	}
	root, closeStore, err := wired.OpenBase(r.c)
	if err != nil {
		return err
	}
	r.root = root
	r.deferUndo(closeStore)
	// The bench's own polls go through one connection of their own, whose backend's CPU tells
	// what they cost; it also finds the cluster whose CPU is counted.
	if r.pollPool, err = newPool(r.c, r.dsn, 1); err != nil {
		return err
	}
	r.deferUndo(r.pollPool.Close)
	r.poll = base.New(r.pollPool, nil, slog.Default())
	r.cluster = findCluster(r.ctx, r.pollPool, r.c.String(wired.DatabaseURLFlag) != "")
	if r.c.Bool("pin") {
		if r.pinPlan, err = planPin(r.cluster); err != nil {
			return err
		}
	}
	if r.svc, err = EnsureService(r.ctx, root, "bench_echo"); err != nil {
		return err
	}
	// An earlier bench that stopped before its backlog drained left tasks whose archives are
	// gone; this run's replicas would lease them and wait for the reaper.
	if left, err := benchDiscardUnfinished(r.ctx, root.Pool, r.svc.ID); err != nil {
		return err
	} else if left > 0 {
		slog.Warn("deleted unfinished tasks an earlier bench left", "service", r.svc.Name, "tasks", left)
	}
	return nil
}

// pin pins, with --pin, PostgreSQL's processes to one CPU and the replicas and this process to
// the others (bench_pin.go), until the run is over; the replicas run with GOMAXPROCS set to
// those (startReplicas).
func (r *benchRun) pin() error {
	if r.pinPlan == nil {
		return nil
	}
	pids := make([]int, len(r.procs))
	for i, p := range r.procs {
		pids[i] = p.Process.Pid
	}
	r.deferUndo(r.pinPlan.undo)
	if err := r.pinPlan.apply(r.cluster, pids); err != nil {
		return err
	}
	r.pinned = r.pinPlan.String()
	r.logf("pinned: %s", r.pinned)
	return nil
}

// pollCPU is the CPU the bench's poll connection's backend used so far, in seconds.
func (r *benchRun) pollCPU() float64 {
	if !r.cluster.counted() {
		return 0
	}
	return procstat.Runtime(r.cluster.backend)
}

// stage writes the source archives and imports them (with --corpora, the corpora's tasks),
// then folds what earlier runs left unfolded, so that none of it is measured.
func (r *benchRun) stage() error {
	dir := r.c.String("dir")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "cortexq-bench-"); err != nil {
			return err
		}
		r.deferUndo(func() { _ = os.RemoveAll(dir) })
	}
	r.name = "bench-" + time.Now().Format("20060102-150405.000")
	dir = filepath.Join(dir, r.name)
	size := r.c.Int("payload-kb") * 1024
	if r.counts != nil {
		if err := r.stageCorpora(dir, size); err != nil {
			return err
		}
	} else {
		r.logf("staging %d archives of %d KB in %s", r.n, r.c.Int("payload-kb"), dir)
		var err error
		if r.entries, err = stageCorpusLogs(r.ctx, dir, r.n, size, r.messages); err != nil {
			return err
		}
		// The staged archives go to disk now, not in the first claims' syncfs: staging is setup.
		syscall.Sync()
		r.imp, err = r.root.Catalog.Import(r.ctx, catalog.ImportRequest{Corpus: r.name, CorpusPath: dir, ServiceID: r.svc.ID, Entries: r.entries})
		if err != nil {
			return err
		}
	}
	// The report changes earlier runs left unfolded (a replica folds every --fold-interval, and
	// the last changes of a run outlive it) are folded now, before the clock starts: otherwise
	// this run's leader folds them at its start, inside the measurement, and a run after one
	// with big logs pays for that one's fold.
	if left, err := r.root.Reports.FoldAll(r.ctx, 0); err != nil {
		return fmt.Errorf("fold what earlier runs left: %w", err)
	} else if left.Tasks > 0 {
		r.logf("folded the report changes of %d tasks earlier runs left, before the clock starts", left.Tasks)
	}
	return nil
}

// stageCorpora stages --corpora: only the archives a run can reach are written.
func (r *benchRun) stageCorpora(dir string, size int) error {
	// The tasks a run can reach: those it converts, and what the replicas may hold besides.
	reach := r.n + r.replicas*r.c.Int("max-in-flight")
	var err error
	r.corpora, r.entries, err = stageCorpora(r.ctx, r.root, r.svc, dir, r.name, r.counts, reach, size, r.logf)
	if err != nil {
		return err
	}
	r.imp.CorpusID = r.corpora[0].id
	// What is left of the backlogs goes when the run is over.
	r.deferUndo(func() {
		if left, err := benchDiscardUnfinished(context.WithoutCancel(r.ctx), r.root.Pool, r.svc.ID); err != nil {
			slog.Warn("unfinished tasks of the bench not deleted", "error", err)
		} else {
			r.logf("deleted the %d unfinished tasks of the run", left)
		}
	})
	syscall.Sync()
	return nil
}

// startReplicas starts --replicas `cortexq serve` subprocesses on loopback and waits until each
// listens; with --chaos a saboteur then leases tasks and vanishes.
func (r *benchRun) startReplicas() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	serveDSN, stopProxy, err := benchServeDSN(r.c, r.dsn, r.logf)
	if err != nil {
		return err
	}
	r.deferUndo(stopProxy) // after the replicas stop
	r.serveDSN = serveDSN
	r.deferUndo(r.stopReplicas)
	for i := range r.replicas {
		cmd := exec.Command(self, r.replicaArgs(i)...)
		cmd.Stderr = os.Stderr
		cmd.Env = os.Environ()
		if i == 0 && r.c.String("cpuprofile") != "" {
			cmd.Env = append(cmd.Env, "CORTEXQ_CPUPROFILE="+r.c.String("cpuprofile"))
		}
		if r.pinPlan != nil {
			cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", len(r.pinPlan.restCPUs)))
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start replica: %w", err)
		}
		r.procs = append(r.procs, cmd)
	}
	for i := range r.replicas {
		if err := waitListening(r.ctx, r.vents[i], 30*time.Second); err != nil {
			return fmt.Errorf("replica %d: %w", i+1, err)
		}
	}
	if k := r.c.Int("chaos"); k > 0 {
		if err := saboteur(r.vents[0], r.svc.Name, k); err != nil {
			return fmt.Errorf("saboteur: %w", err)
		}
		r.logf("saboteur leased %d tasks and vanished", k)
	}
	return nil
}

// replicaArgs are replica i's command line; it picks the replica's ports.
func (r *benchRun) replicaArgs(i int) []string {
	vp, sp, hp := freePort(), freePort(), freePort()
	r.vents = append(r.vents, fmt.Sprintf("tcp://127.0.0.1:%d", vp))
	r.sinks = append(r.sinks, fmt.Sprintf("tcp://127.0.0.1:%d", sp))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", hp)
	r.metricsURLs = append(r.metricsURLs, "http://"+httpAddr+"/metrics")
	leaseTimeout := lease.LeaseTimeoutDefault.String()
	if r.c.Int("chaos") > 0 {
		leaseTimeout = "5s"
	}
	if d := r.c.Duration("lease-timeout"); d > 0 {
		leaseTimeout = d.String()
	}
	args := []string{"--log-level", "warn", "--database-url", r.serveDSN, "--pooler", r.c.String(wired.PoolerFlag), "serve",
		"--replica", fmt.Sprintf("bench-r%d", i+1), "--ventilator", r.vents[i], "--sink", r.sinks[i],
		"--http", httpAddr, "--reap-interval", "1s", "--lease-timeout", leaseTimeout,
		"--max-in-flight", strconv.Itoa(r.c.Int("max-in-flight")),
		// The staged corpus is new: the start-up sweep, a one-off walk of every corpus, would
		// be counted as dispatch work per task.
		"--sweep-at-start=false"}
	return append(args, r.c.StringSlice("serve-flag")...)
}

// stopReplicas stops the replicas (SIGTERM) and waits for them; again, it does nothing.
func (r *benchRun) stopReplicas() {
	for _, p := range r.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range r.procs {
		_ = p.Wait()
	}
	r.procs = nil
}

// drain runs the echo fleet against the replicas until the backlog is drained (with
// --corpora, until --tasks results are recorded) or --deadline passes, and measures it.
func (r *benchRun) drain() error {
	var inner worker.MemoryHandler = worker.Echo{}
	if rate := r.c.Float64("rate"); rate > 0 {
		inner = &paced{next: time.Now(), every: time.Duration(float64(time.Second) / rate)}
	}
	r.handler = &counted{next: inner}
	runCtx, stopWorkers := context.WithCancel(r.ctx)
	r.stopWorkers = stopWorkers
	r.deferUndo(stopWorkers)
	// A new backend's first statements load its catalog caches and plan (milliseconds): that is
	// setup, not the polls' cost, so the poll runs once before the measurement starts.
	if _, err := benchOpen(r.ctx, r.pollPool, r.svc.ID); err != nil {
		return err
	}
	if r.c.Bool("statements") {
		if err := statementsReset(r.ctx, r.pollPool); err != nil {
			return err
		}
	}
	var err error
	if r.dbStart, err = r.root.Now(r.ctx); err != nil {
		return err
	}
	start := time.Now()
	r.cpu[0], r.pollSecs[0] = sampleCPU(r.procs, r.cluster), r.pollCPU()
	r.workersDone = make(chan error, 1)
	go func() {
		r.workersDone <- worker.Run(runCtx, worker.Config{
			Ventilator: strings.Join(r.vents, ","), Sink: strings.Join(r.sinks, ","), Service: r.svc.Name,
			Identity:    fmt.Sprintf("bench-fleet:%s:%d", r.svc.Name, os.Getpid()),
			Concurrency: r.workers, Throttle: 20 * time.Millisecond, IOTimeout: 10 * time.Second,
			Backoff: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), TempDir: scratchDir(), Stats: &r.stats,
		}, r.handler)
	}()
	if err := r.waitDrained(start); err != nil {
		return err
	}
	r.took = time.Since(start)
	r.cpu[1], r.pollSecs[1] = sampleCPU(r.procs, r.cluster), r.pollCPU()
	if r.c.Bool("statements") {
		// Read at once: what the replicas run while they stop is not the measurement's.
		if r.statements, err = statementsRead(r.ctx, r.pollPool, max(r.handler.n.Load(), 1)); err != nil {
			return err
		}
	}
	r.sampleRSS()
	return nil
}

// waitDrained polls until the run is over. The drain check (BenchOpen, two index probes) costs
// PostgreSQL CPU, which the measurement includes (DrainPollMicrosPerTask says how much): it runs
// once a second, and every 20 ms once the fleet has converted --tasks archives. The leases in
// flight (for the log and the peak) come from the replicas' cortexq_in_flight gauges, not a
// count in the database, whose index scan passes over the entries of every row that left in
// flight since the last vacuum. The full tally (Progress) is read once at the end.
func (r *benchRun) waitDrained(start time.Time) error {
	deadline := time.Now().Add(r.c.Duration("deadline"))
	lastLog, lastCount := time.Now(), time.Now()
	for time.Now().Before(deadline) && r.ctx.Err() == nil {
		everySecond := time.Since(lastCount) >= time.Second
		if everySecond {
			lastCount = time.Now()
			inFlight := int64(readMetrics(r.metricsURLs, "cortexq_in_flight")["cortexq_in_flight"])
			r.peak = max(r.peak, inFlight)
			r.sampleRSS()
			if time.Since(lastLog) > 5*time.Second {
				r.logf("  %s: %d in flight", time.Since(start).Round(time.Second), inFlight)
				lastLog = time.Now()
			}
		}
		converted := r.handler.n.Load() >= int64(r.n)
		if over, err := r.over(everySecond, converted); err != nil || over {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// over is one drain check: whether the run is over (with --corpora, --tasks results recorded;
// without, no task of the service open).
func (r *benchRun) over(everySecond, converted bool) (bool, error) {
	if r.corpora != nil {
		if !converted {
			return false, nil
		}
		r.polls++
		done, err := corporaDone(r.ctx, r.poll, r.svc, r.corpora, r.dbStart)
		if err != nil || done < int64(r.n) {
			return false, err
		}
		r.doneAtStop = done
		return true, nil
	}
	if !everySecond && !converted {
		return false, nil
	}
	r.polls++
	open, err := benchOpen(r.ctx, r.pollPool, r.svc.ID)
	return !open, err
}

// sampleRSS raises the replicas' peak RSS to what they hold now at their peak.
func (r *benchRun) sampleRSS() {
	for _, pr := range r.procs {
		r.rssPeak = max(r.rssPeak, peakRSSMB(pr.Process.Pid))
	}
}

// stop stops the fleet and the replicas, reading the replicas' batch sizes before they go.
func (r *benchRun) stop() error {
	var wErr error
	if r.corpora != nil {
		// Leases are still out: the replicas drain them with the workers running.
		r.batches = readBatches(r.metricsURLs)
		r.stopReplicas()
		r.stopWorkers()
		wErr = <-r.workersDone
	} else {
		r.stopWorkers()
		wErr = <-r.workersDone
		r.batches = readBatches(r.metricsURLs)
		r.stopReplicas()
	}
	if wErr != nil && !errors.Is(wErr, context.Canceled) {
		return fmt.Errorf("echo workers: %w", wErr)
	}
	return nil
}

// fold folds what the replicas had not folded when they stopped, and measures it apart: the
// report fold is deferred work (a replica folds every --fold-interval), but work each task
// costs. It fills the report's throughput and CPU figures.
func (r *benchRun) fold() error {
	foldCPUStart, foldStart := sampleCPU(nil, r.cluster), time.Now()
	folded, err := r.root.Reports.FoldPending(r.ctx, 0)
	if err != nil {
		return fmt.Errorf("fold the run's results: %w", err)
	}
	foldTook, foldCPU := time.Since(foldStart), perUnit(foldCPUStart, sampleCPU(nil, r.cluster), max(folded.Tasks, 1))
	if folded.Tasks == 0 {
		foldCPU = nil
	}
	c := r.c
	r.rep = Report{Tasks: r.n, Workers: r.workers, Replicas: r.replicas, PayloadKB: c.Int("payload-kb"),
		Rate: c.Float64("rate"), Chaos: c.Int("chaos"), Seconds: r.took.Seconds(),
		PeakInFlight: r.peak, ReplicaPeakRSSMB: r.rssPeak, NoWorkReplies: r.stats.Mocks.Load(), Messages: r.messages}
	rep := &r.rep
	rep.FoldTasks, rep.FoldSeconds = folded.Tasks, foldTook.Seconds()
	rep.FoldPostgresMicrosPerTask = foldCPU["postgres"]
	rep.PostgresCPU, rep.DrainPolls = r.cluster.String(), r.polls
	rep.Statements, rep.Pinned = r.statements, r.pinned
	rep.ReserveBatchAvg, rep.AttributeBatchAvg, rep.ClaimBatchAvg = r.batches["reserve"], r.batches["attribute"], r.batches["claim"]
	rep.AttributedAtClaim = r.batches["attributed_at_claim"]
	return nil
}

// gates reads the tally and checks the gates: nothing lost, every status the one its log
// derives, every result archive identical to its source. It fills the rest of the report.
func (r *benchRun) gates() error {
	ps, err := r.root.Inspect.Progress(r.ctx, "", r.svc.Name)
	if err != nil {
		return err
	}
	p := sumProgress(ps, r.name, r.corpora)
	rep := &r.rep
	rep.NoProblem, rep.Warning, rep.Error = p.NoProblem, p.Warning, p.Error
	measured := p.Done()
	if r.corpora != nil {
		// Tasks the workers converted after the measurement stopped (the replicas drain their
		// leases with the workers running) are not counted.
		measured = r.doneAtStop
	}
	r.measured = measured
	r.rates(measured)
	p50, p99, err := r.root.Inspect.Latency(r.ctx, r.imp.CorpusID)
	if err != nil {
		return err
	}
	rep.P50Millis, rep.P99Millis = float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000
	rep.Lost = int64(r.n) - p.Done()
	if r.corpora != nil {
		// At least --tasks converted, each NoProblem, each result identical to its source.
		var results int
		rep.BadArchives, results = resultsIdentical(r.entries, r.svc.Name)
		rep.Lost = max(0, rep.Lost)
		rep.GatesOK = p.Done() >= int64(r.n) && p.NoProblem == p.Done() && int64(results) >= p.NoProblem && rep.BadArchives == 0
		rep.Corpora, err = reportCorpora(r.ctx, r.root, r.svc, r.corpora, r.dbStart)
		return err
	}
	rep.BadArchives, _ = ByteIdentical(r.entries, r.svc.Name)
	want := r.wantStatuses()
	rep.GatesOK = rep.Lost == 0 && p.NoProblem == want[0] && p.Warning == want[1] && p.Error == want[2] && rep.BadArchives == 0
	if r.messages == 0 {
		return nil
	}
	st, err := dbsqlc.New(r.root.Pool).BenchMessageStorage(r.ctx)
	if err != nil {
		return pgErr("message storage", err)
	}
	rep.StoredMessages = st.Messages
	if st.Messages > 0 {
		rep.BytesPerMessage = math.Round(float64(st.Bytes)/float64(st.Messages)*10) / 10
	}
	return nil
}

// rates fills the report's throughput and CPU per task from the measured results.
func (r *benchRun) rates(measured int64) {
	rep := &r.rep
	took := r.took
	rep.TasksPerSecond = float64(measured) / took.Seconds()
	rep.TasksPerSecondWithFold = float64(measured) / (took.Seconds() + rep.FoldSeconds)
	rep.MBPerSecond = float64(measured) * float64(r.c.Int("payload-kb")) / 1024 * 2 / took.Seconds()
	if measured <= 0 {
		return
	}
	rep.CPUMicrosPerTask = perUnit(r.cpu[0], r.cpu[1], measured)
	if r.cluster.counted() {
		rep.DrainPollMicrosPerTask = math.Round((r.pollSecs[1]-r.pollSecs[0])*1e6/float64(measured)*10) / 10
		if pg, ok := rep.CPUMicrosPerTask["postgres"]; ok {
			rep.CPUMicrosPerTask["postgres"] = math.Round((pg-rep.DrainPollMicrosPerTask)*10) / 10
		}
	}
}

// wantStatuses counts the NoProblem, Warning and Error tasks the staged logs derive.
func (r *benchRun) wantStatuses() [3]int64 {
	var want [3]int64
	for i := range r.n {
		switch benchLogStatus(i, r.messages) {
		case queue.StatusNoProblem:
			want[0]++
		case queue.StatusWarning:
			want[1]++
		default:
			want[2]++
		}
	}
	return want
}

// vsRiver runs --tasks no-op River jobs on the same database, with --vs-river.
func (r *benchRun) vsRiver() error {
	if !r.c.Bool("vs-river") {
		return nil
	}
	jps, cpu, err := benchRiver(r.c, r.dsn, r.n, r.cluster)
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	r.rep.RiverJobsPerS, r.rep.RiverCPUMicrosPerJob = jps, cpu
	r.rep.RatioVsRiver = r.rep.TasksPerSecond / jps
	return nil
}

// print writes the report: one JSON line with --json, else lines for people.
func (r *benchRun) print() {
	rep := &r.rep
	if r.c.Bool("json") {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(r.c.App.Writer, string(b))
		return
	}
	r.logf("%d tasks in %.2fs: %.0f tasks/s, %.1f MB/s; lease→result p50 %.1f ms, p99 %.1f ms; peak in flight %d; replica peak RSS %.0f MB",
		r.measured, rep.Seconds, rep.TasksPerSecond, rep.MBPerSecond, rep.P50Millis, rep.P99Millis, rep.PeakInFlight, rep.ReplicaPeakRSSMB)
	r.logf("CPU per task (µs): %s; average batch: reserve %.1f, attribute %.1f, claim %.1f; %.0f%% of hand-outs attributed by their claim",
		formatCPU(rep.CPUMicrosPerTask), rep.ReserveBatchAvg, rep.AttributeBatchAvg, rep.ClaimBatchAvg, 100*rep.AttributedAtClaim)
	r.logf("PostgreSQL CPU: %s; the bench's own %d drain checks cost it %.1f µs/task more, left out", rep.PostgresCPU, rep.DrainPolls, rep.DrainPollMicrosPerTask)
	r.logf("report fold after the drain: %d tasks the replicas had not folded, in %.2fs (PostgreSQL %.0f µs/task); with it %.0f tasks/s",
		rep.FoldTasks, rep.FoldSeconds, rep.FoldPostgresMicrosPerTask, rep.TasksPerSecondWithFold)
	if rep.RiverJobsPerS > 0 {
		r.logf("River: %.0f no-op jobs/s; cortexq/River = %.2f", rep.RiverJobsPerS, rep.RatioVsRiver)
		if pg, ok := rep.RiverCPUMicrosPerJob["postgres"]; ok {
			r.logf("PostgreSQL CPU: cortexq %.1f µs/task, River %.1f µs/job (cortexq/River = %.2f)",
				rep.CPUMicrosPerTask["postgres"], pg, rep.CPUMicrosPerTask["postgres"]/pg)
		}
	}
	if rep.Statements != nil {
		r.logf("%s", formatStatements(rep.Statements, 20))
	}
	for _, bc := range rep.Corpora {
		finished := "not finished"
		if bc.FinishedSeconds != nil {
			finished = fmt.Sprintf("finished at %.2f s", *bc.FinishedSeconds)
		}
		r.logf("corpus %s: %d of %d tasks NoProblem, %s", bc.Name, bc.NoProblem, bc.Tasks, finished)
	}
	verdict := map[bool]string{true: "ok", false: "FAILED"}[rep.GatesOK]
	if r.messages > 0 {
		r.logf("messages: about %d a log; %d stored in all, %.1f bytes each (tables, indexes, TOAST)", r.messages, rep.StoredMessages, rep.BytesPerMessage)
		r.logf("gates: lost %d, NoProblem %d, Warning %d, Error %d of %d, as the logs say; archives differing %d → %s",
			rep.Lost, rep.NoProblem, rep.Warning, rep.Error, r.n, rep.BadArchives, verdict)
		printStages(r.c.App.Writer, rep.Stages, rep.StageBytesPerTask)
		return
	}
	r.logf("gates: lost %d, NoProblem %d of %d, archives differing %d → %s", rep.Lost, rep.NoProblem, r.n, rep.BadArchives, verdict)
	printStages(r.c.App.Writer, rep.Stages, rep.StageBytesPerTask)
}
