// Package dispatch is the ZeroMQ side of a replica: the ventilator (ROUTER) that leases tasks to
// requesting workers and streams their payloads, and the sink (PULL) that writes result archives
// and claims them, both batching their database work through queue/lease.
package dispatch

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cortexq/cortexq/queue/cortexlog"
	"github.com/cortexq/cortexq/queue/wire"
)

// Config configures a Server.
type Config struct {
	// VentilatorAddr is the ROUTER endpoint workers request tasks from.
	VentilatorAddr string
	// SinkAddr is the PULL endpoint workers push results to.
	SinkAddr string
	// MaxInFlight is how many leases this replica holds at most; past it, requests get mock
	// replies (backpressure).
	MaxInFlight int
	// MaxInFlightPerWorker is how many unanswered leases of this replica one worker may hold:
	// a request past it gets a no-work reply (worker_cap), so that one worker that requests and
	// never answers cannot take every task. A CorTeX worker holds one task at a time; the
	// second is room for its last result, still on its way or answered through another
	// replica, when its next request comes.
	MaxInFlightPerWorker int
	// MaxInFlightPerKey, when positive, is the same cap for all the workers of one CURVE key
	// together (a worker could take a fresh name for every request); zero: no cap per key.
	MaxInFlightPerKey int
	// MessageSize is the payload chunk size. Keep wire.MessageSize with upstream CorTeX
	// workers: they take a frame shorter than 100,000 bytes as the payload's last.
	MessageSize int
	// MaxResultBytes caps a result: a larger one is recorded Invalid (cortex/result_too_large).
	MaxResultBytes int64
	// MaxMessages is how many log messages of each severity a result keeps; the rest are
	// counted in one cortex/messages_truncated message of that severity (cortexlog.Options).
	MaxMessages int
	// MaxParsedBytes bounds the memory of the reports parsed and not yet claimed (their
	// messages). When it is reached, the writers wait and the sink stops reading its socket:
	// libzmq's queues, then TCP, hold the workers back. A larger report is taken alone. The
	// default, 32 MiB, holds thousands of ordinary reports or 15 with 1,000 messages of 2 KB of
	// each severity, and keeps them well inside the replica's 192 MiB heap limit (cmd/cortexq).
	MaxParsedBytes int64
	// ReserveBatch is the most tasks one reservation takes (docs/semantics.md#reserve). A replica
	// keeps a stock of reserved tasks per service with waiting workers, sized by the requests of
	// the last 100 ms, between reserveMin and ReserveBatch.
	ReserveBatch int
	// Leasers is how many reservation transactions (reserve, release, check) may run at once.
	Leasers int
	// ClaimBatch is the most results one claim transaction decides; ClaimFlush is how long a
	// claim waits for more results after the first.
	ClaimBatch int
	ClaimFlush time.Duration
	// Claimers is how many claim transactions may run at once, in a relay: where the database
	// is far (relayAfter), one gathers and reads its batch while the others only write and
	// commit theirs (claimers.claimer), so that a claim's round trips overlap the commit of the
	// one before it. Writers is how many
	// goroutines write result archives.
	Claimers int
	Writers  int
	// SyncArchives makes each claim batch's published archives durable (one syncfs per file
	// system) before the claim commits.
	SyncArchives bool
	// TCPKeepaliveIdle is the keepalive idle time in seconds on worker-facing sockets (interval
	// 30 s, 4 probes); ≤ 0 disables keepalive.
	TCPKeepaliveIdle int
	// HeartbeatInterval is how often a worker connection that is otherwise quiet gets a ZMTP
	// PING; a connection that sends nothing for HeartbeatTimeout after one is closed, so a
	// peer that connects and goes silent holds no file descriptor for long. Live workers'
	// libzmq answers PINGs by itself, whatever they are doing. Zero takes the defaults.
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// IOThreads is how many I/O threads libzmq runs for the worker connections (ZMQ_IO_THREADS,
	// 1 by default in libzmq). One thread accepts a socket's connections and, with them, does
	// the ZMTP work of the connections it holds; with a fleet of thousands its loop (and the
	// one accept each turn of it) fell behind: see docs/operations.md#fleet-size.
	IOThreads int
	// BindRetry is how long a bind is retried (a restarted replica outlasts TIME_WAIT).
	BindRetry time.Duration
	// OutageBudget is how long the database may fail every transaction before Run gives up
	// with an error (durable state means nothing is lost; a restart finishes the work).
	// Zero takes the default; negative never gives up.
	OutageBudget time.Duration
	// DBTimeout bounds each database call of the worker-facing side (a reservation, a claim,
	// an attribution, a lookup, a resync of the hot mirror): a call on a link gone silent fails
	// after it rather than waiting for the kernel (docs/operations.md#networks).
	DBTimeout time.Duration
	// OutageHeldResults and OutageHeldBytes bound the results held in memory while the database
	// is away, to be claimed once it is back; past them a result is refused and its task runs
	// again once its lease expires (docs/operations.md#networks).
	OutageHeldResults int
	OutageHeldBytes   int64
	// Security turns CURVE on and bounds what hostile peers can cost (curve.go).
	Security Security
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the server's metrics; nil keeps them private.
	Registerer prometheus.Registerer
}

// Defaults of Config.
const (
	VentilatorAddrDefault       = "tcp://*:51695"
	SinkAddrDefault             = "tcp://*:51696"
	MaxInFlightDefault          = 5000
	MaxInFlightPerWorkerDefault = 2
	MaxResultBytesDefault       = int64(2) << 30
	MaxMessagesDefault          = cortexlog.MaxMessagesDefault
	MaxParsedBytesDefault       = int64(32) << 20
	ReserveBatchDefault         = 256
	LeasersDefault              = 2
	ClaimBatchDefault           = 512
	ClaimFlushDefault           = 5 * time.Millisecond
	ClaimersDefault             = 2
	WritersDefault              = 4
	TCPKeepaliveIdleDefault     = 120
	BindRetryDefault            = 75 * time.Second
	IOThreadsDefault            = 2
	DBTimeoutDefault            = 10 * time.Second
	OutageHeldResultsDefault    = 10000
	OutageHeldBytesDefault      = int64(64) << 20
)

// Defaults of Config's ZMTP heartbeats.
const (
	HeartbeatIntervalDefault = 10 * time.Second
	HeartbeatTimeoutDefault  = 30 * time.Second
)

// WithDefaults returns a copy of c with every unset field (zero, or a negative count or size)
// set to its default. TCPKeepaliveIdle and SyncArchives have no unset value: their zero means
// off. A negative BindRetry means none; a negative OutageBudget, never giving up.
func (c Config) WithDefaults() Config {
	c.VentilatorAddr = cmp.Or(c.VentilatorAddr, VentilatorAddrDefault)
	c.SinkAddr = cmp.Or(c.SinkAddr, SinkAddrDefault)
	c.MaxInFlight = orDefault(c.MaxInFlight, MaxInFlightDefault)
	c.MaxInFlightPerWorker = orDefault(c.MaxInFlightPerWorker, MaxInFlightPerWorkerDefault)
	c.MessageSize = orDefault(c.MessageSize, wire.MessageSize)
	c.MaxResultBytes = orDefault(c.MaxResultBytes, MaxResultBytesDefault)
	c.MaxMessages = orDefault(c.MaxMessages, MaxMessagesDefault)
	c.MaxParsedBytes = orDefault(c.MaxParsedBytes, MaxParsedBytesDefault)
	c.ReserveBatch = orDefault(c.ReserveBatch, ReserveBatchDefault)
	c.Leasers = orDefault(c.Leasers, LeasersDefault)
	c.ClaimBatch = orDefault(c.ClaimBatch, ClaimBatchDefault)
	c.ClaimFlush = orDefault(c.ClaimFlush, ClaimFlushDefault)
	c.Claimers = orDefault(c.Claimers, ClaimersDefault)
	c.Writers = orDefault(c.Writers, WritersDefault)
	c.HeartbeatInterval = orDefault(c.HeartbeatInterval, HeartbeatIntervalDefault)
	c.HeartbeatTimeout = orDefault(c.HeartbeatTimeout, HeartbeatTimeoutDefault)
	c.IOThreads = orDefault(c.IOThreads, IOThreadsDefault)
	c.DBTimeout = orDefault(c.DBTimeout, DBTimeoutDefault)
	c.OutageHeldResults = orDefault(c.OutageHeldResults, OutageHeldResultsDefault)
	c.OutageHeldBytes = orDefault(c.OutageHeldBytes, OutageHeldBytesDefault)
	c.BindRetry = max(c.BindRetry, 0)
	c.OutageBudget = cmp.Or(c.OutageBudget, OutageBudgetDefault)
	if c.OutageBudget < 0 {
		c.OutageBudget = 0 // never give up
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate reports a Config, defaults applied, that a Server cannot run with.
func (c Config) validate() error {
	if c.MessageSize > 64<<20 {
		return fmt.Errorf("message size %d is over 64 MiB", c.MessageSize)
	}
	return nil
}

// orDefault is v, or def when v is not positive.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// OutageBudgetDefault is how long the database may stay away before a replica gives up.
const OutageBudgetDefault = 60 * time.Second
