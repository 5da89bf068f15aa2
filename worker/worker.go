// Package worker is a Go library for writing CorTeX-protocol workers: it requests tasks from a
// ventilator (ZeroMQ DEALER), streams each task's payload to a scratch file, runs a Handler on
// it and pushes the result archive to the sink (ZeroMQ PUSH). It speaks the same frames as the
// pericortex workers of the CorTeX fleet, so a cortexq dispatcher (or CorTeX's own) serves both.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	zmq "github.com/pebbe/zmq4"

	"github.com/cortexq/cortexq/queue/wire"
)

// Defaults of Config, as the CorTeX fleet's workers use them.
var (
	VentilatorDefault = "tcp://localhost:" + strconv.Itoa(wire.DefaultVentilatorPort)
	SinkDefault       = "tcp://localhost:" + strconv.Itoa(wire.DefaultSinkPort)
)

// Durations of Config left zero.
const (
	ThrottleDefault  = 60 * time.Second
	IOTimeoutDefault = 120 * time.Second
	BackoffDefault   = 2 * time.Second
)

// Config configures Run.
type Config struct {
	// Ventilator is the dispatcher's task endpoint (VentilatorDefault if empty); several
	// replicas' endpoints may be given, separated by commas.
	Ventilator string
	// Sink is the dispatcher's result endpoint (SinkDefault if empty), or several, separated by
	// commas: a task's result goes back to the replica that handed it out, unless AnySink.
	Sink string
	// AnySink sends results to the sinks in turn, whichever replica handed the task out.
	// Without it, the i-th Ventilator and the i-th Sink endpoint are taken as one replica's when
	// both list as many (more than one): requests take turns over the replicas, and a task's
	// result goes to the sink of the replica that handed it out, which has the task in memory.
	// Lists of other lengths (one shared sink, say) are used as AnySink uses them.
	AnySink bool
	// Service is the service name requested from the ventilator. Required.
	Service string
	// Identity is the worker's name: the DEALER routing id and the result's first frame. Empty
	// means "<host>:<service>:<pid>". With Concurrency above 1 every loop appends "-NN"
	// (01, 02, …), because identities must be unique across the fleet.
	Identity string
	// Concurrency is the number of task loops, each with its own sockets (1 if zero).
	Concurrency int
	// Stopping, when closed, stops Run gently (a warm shutdown): each loop finishes the task in
	// hand (its conversion, and pushing its result) and requests no more. A loop that has no
	// task in hand returns at once: from its throttle or backoff pause, from a request no
	// replica has taken yet, and from the wait for a reply, which it still gives a second (a
	// dispatcher answers at once; a reply that has not come by then is from a replica that is
	// gone, a request lost with a killed one) and whose task, if one comes, it works.
	// Cancelling Run's ctx instead abandons the tasks in hand (the dispatcher retries them at
	// their lease's end, an attempt spent). Nil: never.
	Stopping <-chan struct{}
	// Count stops Run after this many real tasks in all (0 = run until ctx is cancelled).
	Count int
	// Throttle is the pause after a "no work" reply (ThrottleDefault if zero).
	Throttle time.Duration
	// IOTimeout bounds each send and receive (IOTimeoutDefault if zero). When a request gets
	// no reply in time the DEALER socket is rebuilt, so a late reply is discarded.
	IOTimeout time.Duration
	// Backoff is the pause after a transport error or timeout (BackoffDefault if zero); it
	// doubles after a failure in a row, up to twice it, and the loop logs each reconnect.
	Backoff time.Duration
	// MessageSize is the result chunk size (wire.MessageSize if zero).
	MessageSize int
	// Logger receives the worker's logs (slog.Default() if nil).
	Logger *slog.Logger
	// TempDir holds the per-task scratch directories (os.TempDir() if empty).
	TempDir string
	// MemoryPayloadMax is the largest payload a MemoryHandler is given in memory; larger ones
	// go through scratch files. Zero means MemoryPayloadMax.
	MemoryPayloadMax int
	// Stats, if set, is updated as Run works.
	Stats *Stats
	// Sandbox says how the Handler confines its conversions ("none", "bwrap (...)"), for each
	// loop's start-up line; empty: not said.
	Sandbox string
	// Curve, if set, makes both sockets CURVE clients (authenticated and encrypted), for a
	// dispatcher that runs with CURVE on.
	Curve *Curve
}

// Stats counts what Run's loops did. Read the fields with Load while Run works.
type Stats struct {
	// Requests counts requests sent to the ventilator.
	Requests atomic.Uint64
	// Mocks counts "no work" replies.
	Mocks atomic.Uint64
	// Tasks counts real tasks received.
	Tasks atomic.Uint64
	// Failed counts tasks answered with an empty result because the payload could not be
	// stored or the Handler failed.
	Failed atomic.Uint64
	// Pushed counts result messages handed to the sink socket.
	Pushed atomic.Uint64
	// BadReplies counts ventilator replies whose task id was unreadable.
	BadReplies atomic.Uint64
	// Rebuilds counts DEALER sockets rebuilt after a timeout or transport error.
	Rebuilds atomic.Uint64
	// Lost counts requests whose replica disconnected before it answered (asked again at once).
	Lost atomic.Uint64
	// Redirected counts results sent to another replica's sink because the sink of the replica
	// that handed the task out had no replica connected.
	Redirected atomic.Uint64
}

// Run works tasks for cfg.Service until ctx is cancelled or cfg.Count real tasks are done, and
// then returns nil once every loop has stopped and its sockets are closed. It returns an error
// at once if cfg is invalid or the sockets cannot be set up. Transport errors while running
// are logged and retried, never returned.
func Run(ctx context.Context, cfg Config, h Handler) error {
	cfg, identities, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if h == nil {
		return errors.New("worker: nil handler")
	}
	zctx, err := zmq.NewContext()
	if err != nil {
		return fmt.Errorf("worker: zmq context: %w", err)
	}
	loops := make([]*loop, 0, len(identities))
	budget := newBudget(cfg.Count)
	for _, id := range identities {
		l := newLoop(cfg, h, id, zctx, budget)
		// Build the sockets up front so a bad endpoint is an error, not a retry loop.
		err := l.ensureSockets()
		loops = append(loops, l)
		if err != nil {
			for _, l := range loops {
				l.close(0)
			}
			_ = zctx.Term()
			return fmt.Errorf("worker %s: %w", id, err)
		}
	}

	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(func() { l.run(ctx) })
	}
	wg.Wait()
	if err := zctx.Term(); err != nil {
		return fmt.Errorf("worker: zmq context term: %w", err)
	}
	return nil
}

// withDefaults fills in cfg's defaults, checks it and returns the identity of each loop.
func (cfg Config) withDefaults() (Config, []string, error) {
	if err := wire.ValidService([]byte(cfg.Service)); err != nil {
		return cfg, nil, fmt.Errorf("worker: service %q: %w", cfg.Service, err)
	}
	switch {
	case cfg.Concurrency < 0:
		return cfg, nil, fmt.Errorf("worker: concurrency %d < 0", cfg.Concurrency)
	case cfg.Count < 0:
		return cfg, nil, fmt.Errorf("worker: count %d < 0", cfg.Count)
	case cfg.Throttle < 0 || cfg.IOTimeout < 0 || cfg.Backoff < 0 || cfg.MessageSize < 0:
		return cfg, nil, errors.New("worker: negative throttle, io timeout, backoff or message size")
	}
	if cfg.Ventilator == "" {
		cfg.Ventilator = VentilatorDefault
	}
	if cfg.Sink == "" {
		cfg.Sink = SinkDefault
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if cfg.Throttle == 0 {
		cfg.Throttle = ThrottleDefault
	}
	if cfg.IOTimeout == 0 {
		cfg.IOTimeout = IOTimeoutDefault
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = BackoffDefault
	}
	if cfg.MessageSize == 0 {
		cfg.MessageSize = wire.MessageSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MemoryPayloadMax <= 0 {
		cfg.MemoryPayloadMax = MemoryPayloadMax
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.Stats == nil {
		cfg.Stats = new(Stats)
	}
	base := cfg.Identity
	if base == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		base = host + ":" + cfg.Service + ":" + strconv.Itoa(os.Getpid())
	}
	ids := []string{base}
	if cfg.Concurrency > 1 {
		ids = make([]string, cfg.Concurrency)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%02d", base, i+1)
		}
	}
	for _, id := range ids {
		// A routing id is 1–255 bytes and may not start with a zero byte; printable UTF-8
		// keeps it readable in the dispatcher's logs and database.
		if len(id) > wire.MaxIdentityBytes || !utf8.ValidString(id) || strings.IndexFunc(id, unicode.IsControl) >= 0 {
			return cfg, nil, fmt.Errorf("worker: identity %q: not printable UTF-8 of at most %d bytes", id, wire.MaxIdentityBytes)
		}
	}
	return cfg, ids, nil
}

// budget hands out the Count of real tasks to the loops.
type budget struct {
	mu        sync.Mutex
	left      int
	unlimited bool
}

func newBudget(count int) *budget { return &budget{left: count, unlimited: count == 0} }

// take reserves one task before a request; false means the count is reached.
func (b *budget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unlimited {
		return true
	}
	if b.left == 0 {
		return false
	}
	b.left--
	return true
}

// refund returns a reservation whose request brought no task.
func (b *budget) refund() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.unlimited {
		b.left++
	}
}
