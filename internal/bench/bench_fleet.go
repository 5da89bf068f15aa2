package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/urfave/cli/v2"
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
