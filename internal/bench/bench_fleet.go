package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/procstat"
)

// The fleet bench (bench --fleet N): one replica and a simulated fleet of N worker identities in
// this process, each a DEALER connection of its own (ZMTP spoken by the bench, one file
// descriptor each: libzmq would take two) with one request outstanding, its heartbeats
// answered, sharing a PUSH socket per 256 identities for their echoed results; with --churn M, identities are replaced by new ones
// (the old socket closed, as a restarted worker's) until M distinct identities have asked.
// See docs/performance.md#a-fleet-of-workers.

// fleetShard is how many identities share a PUSH socket for their results.
const fleetShard = 256

// fleetDialing is how many identities of the fleet dial and handshake at once. A fleet of
// 10,000 goroutines all dialing at once overflowed the replica's accept queue (4,096): the
// kernel drops the handshake's last ACK while the queue is full, the client's greeting waits
// out TCP's retransmits (up to tens of seconds), and libzmq and the fleet give up on the
// handshake after 30 s. A libzmq DEALER would reconnect; so does the fleet (dial).
const fleetDialing = 256

// fleetReplyBound is how long a request may go unanswered before the bench counts it as
// unanswered (a failed gate): the replica answers every request within 3 s (no work when it has
// none), and a worker gives up after about a minute.
const fleetReplyBound = 10 * time.Second

// withFleet adds the fleet bench's flags to the bench command.
func withFleet(cmd *cli.Command) *cli.Command {
	cmd.Flags = append(cmd.Flags,
		&cli.IntFlag{Name: "fleet", Usage: "simulate a fleet of this many worker identities (one DEALER each, one request outstanding) against one replica instead of --workers echo workers; 0: off", EnvVars: wired.EnvVars("BENCH_FLEET")},
		&cli.IntFlag{Name: "churn", Usage: "with --fleet: replace identities by new ones (a restarted worker's new name) until this many distinct identities have asked; after --tasks are done the fleet keeps restarting, asking and getting no work, until then", EnvVars: wired.EnvVars("BENCH_CHURN")},
		&cli.DurationFlag{Name: "fleet-throttle", Usage: "with --fleet: how long an identity waits after a no-work reply before it asks again", Value: time.Second, EnvVars: wired.EnvVars("BENCH_FLEET_THROTTLE")},
	)
	action := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		if c.Int("fleet") > 0 {
			return runFleetBench(c)
		}
		return action(c)
	}
	return cmd
}

// FleetReport is what a fleet bench measured.
type FleetReport struct {
	Fleet     int `json:"fleet"`
	Churn     int `json:"churn"`
	Tasks     int `json:"tasks"`
	PayloadKB int `json:"payload_kb"`
	// Distinct is how many identities asked; Connected how many were connected at most.
	Distinct  int64 `json:"distinct_identities"`
	Connected int   `json:"connected_identities"`
	// ConnectSeconds is how long the fleet took until every identity had its first reply;
	// Redials counts the dials tried again after a failed connection or handshake.
	ConnectSeconds float64 `json:"connect_seconds"`
	Redials        int64   `json:"redials"`
	Seconds        float64 `json:"seconds"`
	TasksPerS      float64 `json:"tasks_per_s"`
	// Requests, and their replies: tasks and no-work replies. Unanswered counts the requests
	// with no reply within fleetReplyBound.
	Requests    int64 `json:"requests"`
	TaskReplies int64 `json:"task_replies"`
	NoWork      int64 `json:"no_work_replies"`
	Unanswered  int64 `json:"unanswered"`
	// NoWorkReasons are the replica's no-work replies by reason.
	NoWorkReasons map[string]float64 `json:"no_work_reasons"`
	// Reply latency, request to reply (a task or no work), in ms.
	ReplyP50 float64 `json:"reply_p50_ms"`
	ReplyP99 float64 `json:"reply_p99_ms"`
	ReplyMax float64 `json:"reply_max_ms"`
	// LongestWait is the longest an identity slot asked before it got a task, in ms (gaps that
	// ended with a task: work was available); Starved counts slots that got none.
	LongestWait float64 `json:"longest_wait_for_task_ms"`
	Starved     int     `json:"starved"`
	// Tasks per identity slot (a slot is one worker process's line of identities): min, max,
	// max/min and coefficient of variation (standard deviation / mean).
	SlotMin    int64   `json:"tasks_per_slot_min"`
	SlotMax    int64   `json:"tasks_per_slot_max"`
	SlotMaxMin float64 `json:"tasks_per_slot_max_over_min"`
	SlotCV     float64 `json:"tasks_per_slot_cv"`
	// Replica RSS in MB: once every identity had its first reply (start), at the most (peak),
	// at the end with the fleet still connected (final), and once the fleet left (left).
	StartRSS float64 `json:"rss_start_mb"`
	PeakRSS  float64 `json:"rss_peak_mb"`
	FinalRSS float64 `json:"rss_final_mb"`
	LeftRSS  float64 `json:"rss_left_mb"`
	// GoSysMB and GoHeapMB are the replica's Go runtime memory (all of it, and the heap in use)
	// at the end with the fleet connected: the rest of its RSS is libzmq's (its connections).
	GoSysMB  float64 `json:"go_sys_mb"`
	GoHeapMB float64 `json:"go_heap_inuse_mb"`
	// FDLimit is the file descriptor limit the replica inherited (soft = hard).
	FDLimit uint64 `json:"fd_limit"`
	// EntriesConnected are the replica's per-identity tables (cortexq_identity_entries) at the
	// end with the fleet connected; EntriesLeft once it left and the backlog drained.
	EntriesConnected map[string]float64 `json:"entries_connected"`
	EntriesLeft      map[string]float64 `json:"entries_left"`
	NoProblem        int64              `json:"no_problem"`
	Lost             int64              `json:"lost"`
	GatesOK          bool               `json:"gates_ok"`
}

// fleet is the simulated fleet's shared state.
type fleet struct {
	vent, sink, service string
	prefix              string
	throttle            time.Duration
	churnLeft           atomic.Int64 // identities still to start
	restartP            float64      // the share of tasks after which an identity restarts
	tasksLeft           atomic.Int64 // tasks not yet answered by the fleet
	distinct            atomic.Int64
	firstReplies        atomic.Int64
	requests, tasks     atomic.Int64
	noWork, unanswered  atomic.Int64
	redials             atomic.Int64
	// dialing bounds the handshakes under way (fleetDialing).
	dialing     chan struct{}
	mu          sync.Mutex
	latencies   []time.Duration
	longestWait time.Duration
	perSlot     []int64
}

func runFleetBench(c *cli.Context) error {
	wired.TuneGC()
	n, size, tasks := c.Int("fleet"), c.Int("payload-kb")*1024, c.Int("tasks")
	churn := max(c.Int("churn"), n)
	if tasks < 1 || size < 0 {
		return wired.Usagef(c, "--tasks must be at least 1 and --payload-kb not negative")
	}
	ctx := c.Context
	logf := func(format string, args ...any) {
		if !c.Bool("json") {
			fmt.Fprintf(c.App.Writer, format+"\n", args...)
		}
	}
	// Each identity holds a connection (a file descriptor here, one in the replica): raise this process's limits, the hard one too when
	// allowed, before the replica is started and inherits them.
	fdLimit := raiseNoFile(uint64(n + 4096))
	dsn, err := wired.DatabaseURL(c)
	if err != nil {
		return err
	}
	root, closeStore, err := wired.OpenBase(c)
	if err != nil {
		return err
	}
	defer closeStore()
	svc, err := EnsureService(ctx, root, "bench_echo")
	if err != nil {
		return err
	}
	if _, err := benchDiscardUnfinished(ctx, root.Pool, svc.ID); err != nil {
		return err
	}
	dir := c.String("dir")
	if dir == "" {
		dir, err = os.MkdirTemp("", "cortexq-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	name := "fleet-" + time.Now().Format("20060102-150405.000")
	dir = filepath.Join(dir, name)
	logf("staging %d archives of %d KB in %s", tasks, c.Int("payload-kb"), dir)
	entries, err := StageCorpus(ctx, dir, tasks, size)
	if err != nil {
		return err
	}
	syscall.Sync()
	_, err = root.Catalog.Import(ctx, catalog.ImportRequest{Corpus: name, CorpusPath: dir, ServiceID: svc.ID, Entries: entries})
	if err != nil {
		return err
	}

	vent := fmt.Sprintf("tcp://127.0.0.1:%d", freePort())
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", freePort())
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
	metricsURLs := []string{"http://" + httpAddr + "/metrics"}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"--log-level", "warn", "--database-url", dsn, "serve", "--replica", "bench-fleet",
		"--ventilator", vent, "--sink", sink, "--http", httpAddr, "--reap-interval", "1s",
		"--max-in-flight", strconv.Itoa(c.Int("max-in-flight")), "--sweep-at-start=false"}
	args = append(args, c.StringSlice("serve-flag")...)
	replica := exec.Command(self, args...)
	replica.Stderr = os.Stderr
	if err := replica.Start(); err != nil {
		return fmt.Errorf("start replica: %w", err)
	}
	stopped := false
	stopReplica := func() {
		if !stopped {
			stopped = true
			_ = replica.Process.Signal(syscall.SIGTERM)
			_ = replica.Wait()
		}
	}
	defer stopReplica()
	if err := waitListening(ctx, vent, 30*time.Second); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	pid := replica.Process.Pid
	rss := func() float64 {
		b, err := procstat.StatusBytes(pid, "VmRSS")
		if err != nil {
			return 0
		}
		return float64(b) / (1 << 20)
	}

	f := &fleet{vent: vent, sink: sink, service: svc.Name, prefix: fmt.Sprintf("fleet-%d", os.Getpid()),
		throttle: c.Duration("fleet-throttle"), perSlot: make([]int64, n), dialing: make(chan struct{}, fleetDialing)}
	f.churnLeft.Store(int64(churn - n))
	f.restartP = min(1, float64(churn-n)/float64(tasks))
	f.tasksLeft.Store(int64(tasks))
	zctx, err := zmq.NewContext()
	if err != nil {
		return err
	}
	if err := zctx.SetMaxSockets(n/fleetShard + 64); err != nil {
		return fmt.Errorf("zeromq max sockets: %w", err)
	}
	runCtx, stopFleet := context.WithCancel(ctx)
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

	rep := FleetReport{Fleet: n, Churn: churn, Tasks: tasks, PayloadKB: c.Int("payload-kb"), FDLimit: fdLimit}
	deadline := time.Now().Add(c.Duration("deadline"))
	lastLog := time.Now()
	for runCtx.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		rep.Connected = max(rep.Connected, int(f.firstReplies.Load()))
		if rep.StartRSS == 0 && f.firstReplies.Load() >= int64(n) {
			rep.StartRSS = rss()
			rep.ConnectSeconds = time.Since(start).Seconds()
			logf("  %s: all %d identities answered once; replica RSS %.0f MB", time.Since(start).Round(time.Second), n, rep.StartRSS)
		}
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			logf("  %s: %d tasks, %d distinct identities, replica RSS %.0f MB, per-identity entries %.0f", time.Since(start).Round(time.Second),
				f.tasks.Load(), f.distinct.Load(), rss(), identityEntries(readEntries(metricsURLs)))
		}
		if f.tasksLeft.Load() <= 0 && f.churnLeft.Load() <= 0 && f.distinct.Load() >= int64(churn) {
			open, err := benchOpen(ctx, root.Pool, svc.ID)
			if err != nil {
				return err
			}
			if !open {
				break
			}
		}
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second) // the last claims and flushes
	rep.FinalRSS = rss()
	rep.EntriesConnected = readEntries(metricsURLs)
	mem := readMetrics(metricsURLs, "go_memstats_sys_bytes", "go_memstats_heap_inuse_bytes")
	rep.GoSysMB, rep.GoHeapMB = mem["go_memstats_sys_bytes"]/(1<<20), mem["go_memstats_heap_inuse_bytes"]/(1<<20)
	rep.NoWorkReasons = readByLabel(metricsURLs, `cortexq_mock_replies_total{reason="`)
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
	// Once the fleet left, the replica's tables per identity empty (their last entries, the
	// leases of results still on their way, go with their claims or the next resync).
	for wait := time.Now().Add(15 * time.Second); time.Now().Before(wait); time.Sleep(250 * time.Millisecond) {
		rep.EntriesLeft = readEntries(metricsURLs)
		if identityEntries(rep.EntriesLeft) == 0 {
			break
		}
	}
	// The replica hands the memory of closed connections back to the system once it sees them
	// gone (its file descriptors counted every 2 s): wait for that, then for a count after it.
	for wait := time.Now().Add(15 * time.Second); time.Now().Before(wait); time.Sleep(250 * time.Millisecond) {
		if readMetrics(metricsURLs, "cortexq_open_fds")["cortexq_open_fds"] < 256 {
			break
		}
	}
	time.Sleep(5 * time.Second)
	rep.LeftRSS = rss()
	rep.PeakRSS = peakRSSMB(pid)
	stopReplica()

	rep.Seconds = took.Seconds()
	rep.Distinct = f.distinct.Load()
	rep.Requests, rep.TaskReplies, rep.NoWork, rep.Unanswered = f.requests.Load(), f.tasks.Load(), f.noWork.Load(), f.unanswered.Load()
	rep.Redials = f.redials.Load()
	rep.TasksPerS = float64(rep.TaskReplies) / took.Seconds()
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
	ps, err := root.Inspect.Progress(ctx, "", svc.Name)
	if err != nil {
		return err
	}
	p := sumProgress(ps, name, nil)
	rep.NoProblem, rep.Lost = p.NoProblem, int64(tasks)-p.Done()
	rep.GatesOK = rep.Lost == 0 && rep.NoProblem == int64(tasks) && rep.Unanswered == 0 && rep.Starved == 0 &&
		identityEntries(rep.EntriesLeft) == 0 && rep.Distinct >= int64(churn)

	if c.Bool("json") {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(c.App.Writer, string(b))
	} else {
		if rep.ConnectSeconds > 0 {
			logf("all %d identities connected and answered in %.1fs (%d dials tried again)", rep.Connected, rep.ConnectSeconds, rep.Redials)
		} else {
			logf("%d of %d identities connected and answered (%d dials tried again)", rep.Connected, n, rep.Redials)
		}
		logf("%d identities (%d distinct, fd limit %d): %d tasks in %.1fs, %.0f tasks/s; %d requests, %d no work, %d unanswered",
			rep.Fleet, rep.Distinct, rep.FDLimit, rep.TaskReplies, rep.Seconds, rep.TasksPerS, rep.Requests, rep.NoWork, rep.Unanswered)
		logf("reply latency p50 %.1f ms, p99 %.1f ms, max %.1f ms; longest wait for a task %.0f ms; tasks per slot %d..%d (max/min %.2f, CV %.3f), %d starved",
			rep.ReplyP50, rep.ReplyP99, rep.ReplyMax, rep.LongestWait, rep.SlotMin, rep.SlotMax, rep.SlotMaxMin, rep.SlotCV, rep.Starved)
		logf("no-work replies by reason: %v", rep.NoWorkReasons)
		logf("replica RSS: start %.0f MB, peak %.0f MB, final %.0f MB (Go runtime %.0f MB, heap in use %.0f MB), after the fleet left %.0f MB",
			rep.StartRSS, rep.PeakRSS, rep.FinalRSS, rep.GoSysMB, rep.GoHeapMB, rep.LeftRSS)
		logf("per-identity entries connected %v, after the fleet left %v", rep.EntriesConnected, rep.EntriesLeft)
		logf("gates: lost %d, NoProblem %d of %d → %s", rep.Lost, rep.NoProblem, tasks, map[bool]string{true: "ok", false: "FAILED"}[rep.GatesOK])
	}
	if !rep.GatesOK {
		return fmt.Errorf("fleet bench gates failed: lost %d, NoProblem %d of %d, unanswered %d, starved %d, entries left %v, distinct %d",
			rep.Lost, rep.NoProblem, tasks, rep.Unanswered, rep.Starved, rep.EntriesLeft, rep.Distinct)
	}
	return nil
}

// runShard serves slots [first, last) of the fleet until ctx ends: a goroutine per identity,
// each on a ZMTP DEALER connection of its own (fleetDealer), and one PUSH socket for the shard's
// results.
func (f *fleet) runShard(ctx context.Context, zctx *zmq.Context, first, last int) error {
	push, err := zctx.NewSocket(zmq.PUSH)
	if err != nil {
		return err
	}
	defer push.Close()
	if err := errors.Join(push.SetLinger(0), push.Connect(f.sink)); err != nil {
		return err
	}
	results := make(chan [][]byte, last-first)
	var slots sync.WaitGroup
	errs := make(chan error, last-first)
	for i := first; i < last; i++ {
		slots.Go(func() {
			if err := f.runSlot(ctx, i, results); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	go func() {
		slots.Wait()
		close(results)
	}()
	for frames := range results {
		if _, err := push.SendMessage(frames); err != nil {
			return fmt.Errorf("send result: %w", err)
		}
	}
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// runSlot is one simulated worker: an identity that asks, echoes the task it gets, and asks
// again (after the throttle when it got no work), restarted under a new identity as the churn
// says, until ctx ends.
func (f *fleet) runSlot(ctx context.Context, i int, results chan<- [][]byte) error {
	var local []time.Duration
	var longest time.Duration
	var tasks int64
	defer func() {
		f.mu.Lock()
		f.latencies = append(f.latencies, local...)
		f.longestWait = max(f.longestWait, longest)
		f.perSlot[i] = tasks
		f.mu.Unlock()
	}()
	replied := false
	askFrom := time.Now()
	for gen := 0; ctx.Err() == nil; gen++ {
		name := fmt.Sprintf("%s-%d-%d", f.prefix, i, gen)
		d, err := f.dial(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("identity %s: %w", name, err)
		}
		stop := context.AfterFunc(ctx, func() { d.conn.Close() })
		f.distinct.Add(1)
		restart := false
		for !restart && ctx.Err() == nil {
			sent := time.Now()
			if err := d.send([]byte(f.service)); err != nil {
				break
			}
			f.requests.Add(1)
			msg, err := d.recv(fleetReplyBound)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				f.unanswered.Add(1)
				continue
			}
			if err != nil {
				break
			}
			now := time.Now()
			local = append(local, now.Sub(sent))
			if !replied {
				replied = true
				f.firstReplies.Add(1)
			}
			if len(msg) >= 2 && string(msg[0]) != "0" {
				results <- append([][]byte{[]byte(name), []byte(f.service)}, msg...)
				f.tasks.Add(1)
				f.tasksLeft.Add(-1)
				tasks++
				longest = max(longest, now.Sub(askFrom))
				askFrom = now
				restart = fleetRoll(f.restartP)
			} else {
				f.noWork.Add(1)
				// Once the tasks are done, identities keep restarting until --churn is reached.
				restart = f.tasksLeft.Load() <= 0
				if !restart || f.churnLeft.Load() <= 0 {
					select {
					case <-time.After(f.throttle):
					case <-ctx.Done():
					}
				}
			}
			if restart && f.churnLeft.Add(-1) < 0 {
				restart = false
			}
		}
		stop()
		d.conn.Close()
	}
	return nil
}

// dial connects an identity to the ventilator, at most fleetDialing at once, and dials again
// (after 100 ms, libzmq's reconnect interval) when the connection or its handshake fails, as a
// libzmq DEALER reconnects, up to 5 times; f.redials counts the retries.
func (f *fleet) dial(ctx context.Context, name string) (*fleetDealer, error) {
	for try := 0; ; try++ {
		select {
		case f.dialing <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		d, err := dialDealer(ctx, f.vent, name)
		<-f.dialing
		if err == nil || ctx.Err() != nil || try == 5 {
			return d, err
		}
		f.redials.Add(1)
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fleetRand is the fleet's restart dice (deterministic, shared, good enough for a spread).
var fleetRand atomic.Uint64

// fleetRoll reports true with probability p.
func fleetRoll(p float64) bool {
	if p >= 1 {
		return true
	}
	x := fleetRand.Add(0x9E3779B97F4A7C15)
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	return float64(x>>11)/float64(1<<53) < p
}

// raiseNoFile raises this process's file descriptor limit to at least want (the hard limit
// too, where the process may) and reports the soft limit it has.
func raiseNoFile(want uint64) uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Max < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return want
		}
	}
	rl.Cur = rl.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	return rl.Cur
}

// readEntries reads the replicas' cortexq_identity_entries gauges, by table.
func readEntries(urls []string) map[string]float64 {
	return readByLabel(urls, `cortexq_identity_entries{table="`)
}

// readByLabel sums the samples of a metric with one label over the replicas' /metrics, by the
// label's value; prefix is the metric's name, "{" and the label up to its value's first byte.
func readByLabel(urls []string, prefix string) map[string]float64 {
	out := map[string]float64{}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, u := range urls {
		resp, err := client.Get(u)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.Lines(string(body)) {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
			if !ok {
				continue
			}
			table, value, _ := strings.Cut(rest, `"} `)
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				out[table] += v
			}
		}
	}
	return out
}

// identityEntries sums the entries kept per worker identity; the budgets are kept per peer
// (an IP address or CURVE key), not per identity, and stay while the peer was charged lately.
func identityEntries(m map[string]float64) float64 {
	total := 0.0
	for table, v := range m {
		if table != "budgets" {
			total += v
		}
	}
	return total
}

// percentileMS is the q-quantile of sorted durations, in ms.
func percentileMS(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)
	return float64(sorted[max(i, 0)].Microseconds()) / 1000
}

// spread reports the min, max, max/min and coefficient of variation of counts.
func spread(counts []int64) (lo, hi int64, ratio, cv float64) {
	if len(counts) == 0 {
		return 0, 0, 0, 0
	}
	lo, hi = slices.Min(counts), slices.Max(counts)
	var sum, sq float64
	for _, k := range counts {
		sum += float64(k)
	}
	mean := sum / float64(len(counts))
	for _, k := range counts {
		sq += (float64(k) - mean) * (float64(k) - mean)
	}
	if mean > 0 {
		cv = math.Sqrt(sq/float64(len(counts))) / mean
	}
	if lo > 0 {
		ratio = float64(hi) / float64(lo)
	}
	return lo, hi, ratio, cv
}
