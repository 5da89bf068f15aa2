package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/procstat"
)

// runFleetBench is `cortexq bench --fleet`: a fleetRun taken through its phases in order.
func runFleetBench(c *cli.Context) error {
	wired.TuneGC()
	r := &fleetRun{c: c, ctx: c.Context, n: c.Int("fleet"), size: c.Int("payload-kb") * 1024, tasks: c.Int("tasks")}
	r.churn = max(c.Int("churn"), r.n)
	if r.tasks < 1 || r.size < 0 {
		return wired.Usagef(c, "--tasks must be at least 1 and --payload-kb not negative")
	}
	defer r.cleanUp()
	for _, phase := range []func() error{r.stage, r.startReplica, r.run, r.settle, r.tally} {
		if err := phase(); err != nil {
			return err
		}
	}
	r.print()
	if rep := r.rep; !rep.GatesOK {
		return fmt.Errorf("fleet bench gates failed: lost %d, NoProblem %d of %d, unanswered %d, starved %d, entries left %v, distinct %d",
			rep.Lost, rep.NoProblem, r.tasks, rep.Unanswered, rep.Starved, rep.EntriesLeft, rep.Distinct)
	}
	return nil
}

// fleetRun is one fleet bench: --fleet simulated worker identities (--churn distinct ones in
// all) against one replica. Each phase is a method; cleanUp undoes what they set up.
type fleetRun struct {
	c                      *cli.Context
	ctx                    context.Context
	n, size, tasks, churn  int
	undo                   []func()
	dsn, name              string
	root                   *base.Base
	svc                    catalog.Service
	vent, sink, metricsURL string
	replica                *exec.Cmd
	f                      *fleet
	took                   time.Duration
	rep                    FleetReport
	fdLimit                uint64
	stoppedReplica         bool
}

// cleanUp undoes what the phases set up, last first.
func (r *fleetRun) cleanUp() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
}

// logf prints a progress line, unless --json.
func (r *fleetRun) logf(format string, args ...any) {
	if !r.c.Bool("json") {
		fmt.Fprintf(r.c.App.Writer, format+"\n", args...)
	}
}

// stage raises this process's file limits (each identity holds a connection: a file
// descriptor here, one in the replica, which inherits them), opens the database and stages and
// imports the fleet's corpus.
func (r *fleetRun) stage() error {
	r.fdLimit = raiseNoFile(uint64(r.n + 4096))
	var err error
	if r.dsn, err = wired.DatabaseURL(r.c); err != nil {
		return err
	}
	root, closeStore, err := wired.OpenBase(r.c)
	if err != nil {
		return err
	}
	r.root = root
	r.undo = append(r.undo, closeStore)
	if r.svc, err = EnsureService(r.ctx, root, "bench_echo"); err != nil {
		return err
	}
	if _, err := benchDiscardUnfinished(r.ctx, root.Pool, r.svc.ID); err != nil {
		return err
	}
	dir := r.c.String("dir")
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cortexq-bench-"); err != nil {
			return err
		}
		r.undo = append(r.undo, func() { _ = os.RemoveAll(dir) })
	}
	r.name = "fleet-" + time.Now().Format("20060102-150405.000")
	dir = filepath.Join(dir, r.name)
	r.logf("staging %d archives of %d KB in %s", r.tasks, r.c.Int("payload-kb"), dir)
	entries, err := StageCorpus(r.ctx, dir, r.tasks, r.size)
	if err != nil {
		return err
	}
	syscall.Sync()
	_, err = root.Catalog.Import(r.ctx, catalog.ImportRequest{Corpus: r.name, CorpusPath: dir, ServiceID: r.svc.ID, Entries: entries})
	return err
}

// startReplica starts the replica (a `cortexq serve` subprocess on loopback) and waits until
// it listens.
func (r *fleetRun) startReplica() error {
	r.vent = fmt.Sprintf("tcp://127.0.0.1:%d", freePort())
	r.sink = fmt.Sprintf("tcp://127.0.0.1:%d", freePort())
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
	r.metricsURL = "http://" + httpAddr + "/metrics"
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"--log-level", "warn", "--database-url", r.dsn, "--pooler", r.c.String(wired.PoolerFlag), "serve", "--replica", "bench-fleet",
		"--ventilator", r.vent, "--sink", r.sink, "--http", httpAddr, "--reap-interval", "1s",
		"--max-in-flight", strconv.Itoa(r.c.Int("max-in-flight")), "--sweep-at-start=false"}
	args = append(args, r.c.StringSlice("serve-flag")...)
	r.replica = exec.Command(self, args...)
	r.replica.Stderr = os.Stderr
	if err := r.replica.Start(); err != nil {
		return fmt.Errorf("start replica: %w", err)
	}
	r.undo = append(r.undo, r.stopReplica)
	if err := waitListening(r.ctx, r.vent, 30*time.Second); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	return nil
}

// stopReplica stops the replica (SIGTERM) and waits for it, once.
func (r *fleetRun) stopReplica() {
	if r.replica != nil && !r.stoppedReplica {
		r.stoppedReplica = true
		_ = r.replica.Process.Signal(syscall.SIGTERM)
		_ = r.replica.Wait()
	}
}

// rss is the replica's resident set now, in MB.
func (r *fleetRun) rss() float64 {
	b, err := procstat.StatusBytes(r.replica.Process.Pid, "VmRSS")
	if err != nil {
		return 0
	}
	return float64(b) / (1 << 20)
}

// run runs the fleet in shards of fleetShard identities until the tasks are done, --deadline
// passes or a shard fails, then stops it.
func (r *fleetRun) run() error {
	n := r.n
	f := &fleet{vent: r.vent, sink: r.sink, service: r.svc.Name, prefix: fmt.Sprintf("fleet-%d", os.Getpid()),
		throttle: r.c.Duration("fleet-throttle"), perSlot: make([]int64, n), dialing: make(chan struct{}, fleetDialing)}
	f.churnLeft.Store(int64(r.churn - n))
	f.restartP = min(1, float64(r.churn-n)/float64(r.tasks))
	f.tasksLeft.Store(int64(r.tasks))
	r.f = f
	zctx, err := zmq.NewContext()
	if err != nil {
		return err
	}
	if err := zctx.SetMaxSockets(n/fleetShard + 64); err != nil {
		return fmt.Errorf("zeromq max sockets: %w", err)
	}
	runCtx, stopFleet := context.WithCancel(r.ctx)
	defer stopFleet()
	var shards sync.WaitGroup
	shardErr := make(chan error, n/fleetShard+1)
	start := time.Now()
	for first := 0; first < n; first += fleetShard {
		shards.Go(func() {
			if err := f.runShard(runCtx, zctx, first, min(first+fleetShard, n)); err != nil {
				shardErr <- err
				stopFleet()
			}
		})
	}
	r.rep = FleetReport{Fleet: n, Churn: r.churn, Tasks: r.tasks, PayloadKB: r.c.Int("payload-kb"), FDLimit: r.fdLimit}
	if err := r.watch(runCtx, start); err != nil {
		return err
	}
	r.took = time.Since(start)
	time.Sleep(2 * time.Second) // the last claims and flushes
	r.rep.FinalRSS = r.rss()
	urls := []string{r.metricsURL}
	r.rep.EntriesConnected = readEntries(urls)
	mem := readMetrics(urls, "go_memstats_sys_bytes", "go_memstats_heap_inuse_bytes")
	r.rep.GoSysMB, r.rep.GoHeapMB = mem["go_memstats_sys_bytes"]/(1<<20), mem["go_memstats_heap_inuse_bytes"]/(1<<20)
	r.rep.NoWorkReasons = readByLabel(urls, `cortexq_mock_replies_total{reason="`)
	stopFleet()
	shards.Wait()
	if err := zctx.Term(); err != nil {
		return fmt.Errorf("zeromq context: %w", err)
	}
	select {
	case err := <-shardErr:
		return fmt.Errorf("fleet: %w", err)
	default:
	}
	return nil
}

// watch logs the fleet's progress until its tasks are done and the service has none open, or
// runCtx ends, or --deadline passes.
func (r *fleetRun) watch(runCtx context.Context, start time.Time) error {
	f, rep := r.f, &r.rep
	deadline := time.Now().Add(r.c.Duration("deadline"))
	lastLog := time.Now()
	for runCtx.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		rep.Connected = max(rep.Connected, int(f.firstReplies.Load()))
		if rep.StartRSS == 0 && f.firstReplies.Load() >= int64(r.n) {
			rep.StartRSS = r.rss()
			rep.ConnectSeconds = time.Since(start).Seconds()
			r.logf("  %s: all %d identities answered once; replica RSS %.0f MB", time.Since(start).Round(time.Second), r.n, rep.StartRSS)
		}
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			r.logf("  %s: %d tasks, %d distinct identities, replica RSS %.0f MB, per-identity entries %.0f", time.Since(start).Round(time.Second),
				f.tasks.Load(), f.distinct.Load(), r.rss(), identityEntries(readEntries([]string{r.metricsURL})))
		}
		if f.tasksLeft.Load() > 0 || f.churnLeft.Load() > 0 || f.distinct.Load() < int64(r.churn) {
			continue
		}
		open, err := benchOpen(r.ctx, r.root.Pool, r.svc.ID)
		if err != nil || !open {
			return err
		}
	}
	return nil
}

// settle waits for the replica to let go of the fleet once it left: its tables per identity
// empty (their last entries, the leases of results still on their way, go with their claims or
// the next resync), and the memory of closed connections handed back to the system once it
// sees them gone (its file descriptors counted every 2 s); then it reads the replica's memory
// and stops it.
func (r *fleetRun) settle() error {
	urls := []string{r.metricsURL}
	for wait := time.Now().Add(15 * time.Second); time.Now().Before(wait); time.Sleep(250 * time.Millisecond) {
		r.rep.EntriesLeft = readEntries(urls)
		if identityEntries(r.rep.EntriesLeft) == 0 {
			break
		}
	}
	for wait := time.Now().Add(15 * time.Second); time.Now().Before(wait); time.Sleep(250 * time.Millisecond) {
		if readMetrics(urls, "cortexq_open_fds")["cortexq_open_fds"] < 256 {
			break
		}
	}
	time.Sleep(5 * time.Second)
	r.rep.LeftRSS = r.rss()
	r.rep.PeakRSS = peakRSSMB(r.replica.Process.Pid)
	r.stopReplica()
	return nil
}

// tally fills the report from the fleet's counts and the database's, and checks the gates.
func (r *fleetRun) tally() error {
	f, rep := r.f, &r.rep
	rep.Seconds = r.took.Seconds()
	rep.Distinct = f.distinct.Load()
	rep.Requests, rep.TaskReplies, rep.NoWork, rep.Unanswered = f.requests.Load(), f.tasks.Load(), f.noWork.Load(), f.unanswered.Load()
	rep.Redials = f.redials.Load()
	rep.TasksPerS = float64(rep.TaskReplies) / r.took.Seconds()
	slices.Sort(f.latencies)
	rep.ReplyP50, rep.ReplyP99 = percentileMS(f.latencies, 0.50), percentileMS(f.latencies, 0.99)
	rep.ReplyMax = percentileMS(f.latencies, 1)
	rep.LongestWait = float64(f.longestWait.Microseconds()) / 1000
	rep.SlotMin, rep.SlotMax, rep.SlotMaxMin, rep.SlotCV = spread(f.perSlot)
	for _, k := range f.perSlot {
		if k == 0 {
			rep.Starved++
		}
	}
	ps, err := r.root.Inspect.Progress(r.ctx, "", r.svc.Name)
	if err != nil {
		return err
	}
	p := sumProgress(ps, r.name, nil)
	rep.NoProblem, rep.Lost = p.NoProblem, int64(r.tasks)-p.Done()
	rep.GatesOK = rep.Lost == 0 && rep.NoProblem == int64(r.tasks) && rep.Unanswered == 0 && rep.Starved == 0 &&
		identityEntries(rep.EntriesLeft) == 0 && rep.Distinct >= int64(r.churn)
	return nil
}

// print writes the report: one JSON line with --json, else lines for people.
func (r *fleetRun) print() {
	rep := &r.rep
	if r.c.Bool("json") {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(r.c.App.Writer, string(b))
		return
	}
	if rep.ConnectSeconds > 0 {
		r.logf("all %d identities connected and answered in %.1fs (%d dials tried again)", rep.Connected, rep.ConnectSeconds, rep.Redials)
	} else {
		r.logf("%d of %d identities connected and answered (%d dials tried again)", rep.Connected, r.n, rep.Redials)
	}
	r.logf("%d identities (%d distinct, fd limit %d): %d tasks in %.1fs, %.0f tasks/s; %d requests, %d no work, %d unanswered",
		rep.Fleet, rep.Distinct, rep.FDLimit, rep.TaskReplies, rep.Seconds, rep.TasksPerS, rep.Requests, rep.NoWork, rep.Unanswered)
	r.logf("reply latency p50 %.1f ms, p99 %.1f ms, max %.1f ms; longest wait for a task %.0f ms; tasks per slot %d..%d (max/min %.2f, CV %.3f), %d starved",
		rep.ReplyP50, rep.ReplyP99, rep.ReplyMax, rep.LongestWait, rep.SlotMin, rep.SlotMax, rep.SlotMaxMin, rep.SlotCV, rep.Starved)
	r.logf("no-work replies by reason: %v", rep.NoWorkReasons)
	r.logf("replica RSS: start %.0f MB, peak %.0f MB, final %.0f MB (Go runtime %.0f MB, heap in use %.0f MB), after the fleet left %.0f MB",
		rep.StartRSS, rep.PeakRSS, rep.FinalRSS, rep.GoSysMB, rep.GoHeapMB, rep.LeftRSS)
	r.logf("per-identity entries connected %v, after the fleet left %v", rep.EntriesConnected, rep.EntriesLeft)
	r.logf("gates: lost %d, NoProblem %d of %d → %s", rep.Lost, rep.NoProblem, r.tasks, map[bool]string{true: "ok", false: "FAILED"}[rep.GatesOK])
}
