package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	zmq "github.com/pebbe/zmq4"
	"golang.org/x/sync/semaphore"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/cortexlog"
	"github.com/cortexq/cortexq/queue/hot"
	"github.com/cortexq/cortexq/queue/internal/startstop"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/wire"
)

// sink is the services that take results from the workers: the receiver, which owns the PULL
// socket, and the writers, which place each result and hand it to the claimers (claim.go).
type sink struct {
	*core
	claims    *claimers
	pull      *zmq.Socket
	inbox     chan inbound        // the receiver's results, for the writers; closed by the receiver
	unwritten *semaphore.Weighted // bytes of received results not yet written (resultsHeldMax)
	// coldReqs carries the writers' lookups of tasks not mirrored to the batcher (coldlookup.go),
	// and slow holds the results of peers past their bogus budget (guard.go).
	coldReqs chan lookup
	slow     slowLane
	outage   *outageHeld // results held while the database is away (outage.go)
	// stopping is closed when the writers' stop begins (the receiver has stopped): the held
	// results' last pass.
	stopping chan struct{}
}

func newSink(c *core, claims *claimers) *sink {
	return &sink{core: c, claims: claims,
		inbox:     make(chan inbound, 256),
		unwritten: semaphore.NewWeighted(resultsHeldMax),
		coldReqs:  make(chan lookup, c.cfg.Writers),
		outage:    newOutageHeld(c.cfg.OutageHeldResults, c.cfg.OutageHeldBytes, c.cfg.Registerer),
		stopping:  make(chan struct{}),
	}
}

// socket is the service of the sink's PULL socket: made at the start, closed at the stop.
func (s *sink) socket(z *zmqContext) startstop.Service {
	return startstop.Funcs(func(context.Context) (func(), error) {
		pull, err := s.openSocket(z.Context)
		if err != nil {
			return nil, err
		}
		s.pull = pull
		return func() { _ = pull.Close() }, nil
	})
}

// openSocket makes the sink's PULL socket.
func (s *sink) openSocket(zctx *zmq.Context) (*zmq.Socket, error) {
	pull, err := zctx.NewSocket(zmq.PULL)
	if err != nil {
		return nil, fmt.Errorf("sink socket: %w", err)
	}
	maxMsg := sinkFrameMax(s.cfg.MaxResultBytes)
	for _, set := range []func() error{
		func() error { return pull.SetLinger(0) },
		func() error { return pull.SetBacklog(listenBacklog) },
		func() error { return pull.SetRcvtimeo(pollInterval) },
		func() error { return pull.SetMaxmsgsize(maxMsg) },
		func() error { return setKeepalive(pull, s.cfg.TCPKeepaliveIdle) },
		func() error { return setHeartbeat(pull, s.cfg.HeartbeatInterval, s.cfg.HeartbeatTimeout) },
	} {
		if err := set(); err != nil {
			pull.Close()
			return nil, fmt.Errorf("sink socket options: %w", err)
		}
	}
	return pull, nil
}

// sinkFrameMax is the sink's ZMQ_MAXMSGSIZE: a frame larger than this cuts its sender's
// connection. It lets a single frame of a result of up to twice the cap through, so that such a
// result is recorded Invalid (cortex/result_too_large) rather than lost with the connection;
// and it never exceeds math.MaxInt32, since a larger frame would reach us silently cut to that
// length (libzmq's and pebbe's receive report sizes as a C int).
func sinkFrameMax(maxResult int64) int64 {
	return min(satAdd(maxResult, maxResult), math.MaxInt32)
}

// receiver is the service of the receiver's loop (receive): its stop ends the loop, which
// closes the writers' inbox.
func (s *sink) receiver(fail context.CancelCauseFunc) startstop.Service {
	return &loops{n: 1, fail: fail, run: func(ctx context.Context) error { return s.receive(ctx, s.pull, s.inbox) }}
}

// writers is the service of the writers, the cold lookups' batcher, the slow lane and the
// replay of the results held through an outage. Its stop comes once the receiver has closed
// the inbox: the writers place what is in it; on a stop their lookups still reach the
// database for writersGrace (the results of tasks this replica does not mirror need one); on
// a failure (failed), such as an outage, they drop the rest at once, for the reaper. Every
// result they place is with the claimers when the stop returns.
type writersService struct {
	s                *sink
	failed           func() bool
	cancel           context.CancelFunc
	slowStop         chan struct{} // closed once no writer parks any more: the slow lane's last pass
	writers, lookups sync.WaitGroup
}

func (s *sink) writers(failed func() bool) startstop.Service {
	return &writersService{s: s, failed: failed}
}

// Start starts the writers and their helpers.
func (w *writersService) Start(ctx context.Context) error {
	s := w.s
	ctx, w.cancel = context.WithCancel(ctx)
	w.slowStop = make(chan struct{})
	w.lookups.Go(func() { s.lookupBatches(ctx, s.coldReqs) })
	w.lookups.Go(func() { s.runSlowLane(ctx, w.slowStop) })
	for range s.cfg.Writers {
		w.writers.Go(func() { s.writer(ctx, s.inbox) })
	}
	w.writers.Go(func() { s.replayHeld(ctx, s.stopping) })
	return nil
}

// Stop waits for the writers to place what the receiver took, then for the lookups.
func (w *writersService) Stop() {
	if w.cancel == nil {
		return
	}
	if w.failed() {
		w.cancel()
	} else {
		grace := time.AfterFunc(writersGrace, w.cancel)
		defer grace.Stop()
	}
	close(w.s.stopping)
	w.writers.Wait()
	close(w.s.coldReqs)
	close(w.slowStop)
	w.lookups.Wait()
	w.cancel()
}

// inbound is a parsed result message.
type inbound struct {
	res    wire.Result
	from   peer
	weight int64 // held against sink.unwritten until the writer is done with res.Data
	// wasHeld: the result has been held for the database's return (outage.go) at least once.
	wasHeld bool
	// received is when the result came in whole (monotonic clock): the end of its worker stage.
	received time.Time
	// worker is the sender's worker as leases name it (under CURVE prefixed with its key), and
	// mirror the hot mirror's entry of the task as the result came in (mirrored: it had one).
	worker   string
	mirror   hot.Task
	mirrored bool
}

// item is a result ready to be claimed: its reply for the lease state machine and what
// publishing it means on disk.
type item struct {
	result lease.Result
	file   archive.Pending // the result's archive, on its way into place
	size   int64
	from   peer
	weight int64 // held against claimers.parsed until the item's claim is over
	// service is the name of the task's service (cortexq_results_total's label).
	service string
	// queued is when the item was handed to the claimers (zero: now); the claim batch it
	// opens waits for more only until ClaimFlush after it.
	queued time.Time
	// handout is the mirror's entry of this replica's hand-out of the task to the sender, if
	// any: its stage marks (noteStages).
	handout hot.Task
}

// receive is the receiver's loop; it owns the PULL socket: it parses result messages and hands
// them to the writers. What it has handed over and the writers have not yet written is bounded
// by s.unwritten.
func (s *sink) receive(ctx context.Context, pull *zmq.Socket, inbox chan<- inbound) error {
	defer close(inbox)
	// A result taken off the socket is handed over even when the stop comes meanwhile: the
	// writers run until this loop closes the inbox (the group stops them after the receiver),
	// so the hand-off ends. Only writersGrace past the stop (writers stuck on the database)
	// does it give up, and the result is the reaper's.
	handoff, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(writersGrace, cancel) })
	defer stop()
	limiter := wire.NewRateLimiter(5 * time.Second)
	// A result over the size cap is recorded by its size alone: its data past the cap (and
	// the slack for frame overhead) is dropped as it is received.
	lim := frameLimits{headers: 3, body: satAdd(s.cfg.MaxResultBytes, resultFrameSlack)}
	for ctx.Err() == nil {
		msg, err := s.recvFrom(pull, 0, "sink", lim)
		received := time.Now()
		if err != nil {
			if isAgain(err) {
				continue
			}
			if isClosed(err) {
				return nil
			}
			s.logger.Warn("sink receive failed", "error", err)
			continue
		}
		if msg.droppedFrames > 0 && len(msg.frames) == lim.headers {
			// Even the first data frame was past the limit: the result is its size alone.
			msg.frames = append(msg.frames, nil)
		}
		res, err := wire.ParseResult(msg.frames)
		if msg.err != nil {
			err = msg.err
		}
		if err == nil && msg.droppedFrames > 0 {
			res.Size = satAdd(res.Size, msg.droppedBytes)
			res.Data = nil // only its size is needed now: it is over the cap, or unusable
			if res.Size <= s.cfg.MaxResultBytes {
				err = &wire.FrameError{Reason: wire.ReasonTooManyFrames,
					Detail: fmt.Sprintf("%d bytes in more than %d frames", res.Size, len(msg.frames)-lim.headers)}
			}
		}
		if err != nil {
			s.metrics.discards.WithLabelValues("sink", wire.ReasonOf(err)).Inc()
			if n, emit := limiter.Record(); emit {
				s.logger.Warn("malformed results discarded", "count", n, "last_error", err)
			}
			continue
		}
		// Its worker has replied: the lease no longer counts against the worker's cap, whatever
		// its claim decides (the cap bounds unanswered leases, ventilator.go).
		in := inbound{res: res, from: msg.from, received: received, worker: msg.from.worker(res.Identity)}
		in.mirror, in.mirrored = s.hot.Answered(res.TaskID, in.worker)
		in.weight = min(heldWeight(res.Data), resultsHeldMax)
		if err := s.unwritten.Acquire(handoff, in.weight); err != nil {
			return nil
		}
		select {
		case inbox <- in:
		case <-handoff.Done():
			return nil
		}
	}
	return nil
}

// resultFrameSlack is the room beyond MaxResultBytes a result's frames may take (at frameCost
// each), so that a result just under the cap keeps all its frames unless it has more than
// 65,536 of them.
const resultFrameSlack = 65536 * frameCost

// resultsHeldMax bounds the memory of results received and not yet written to their temp files
// (a larger result is taken alone). Past it, the receiver waits, and libzmq's queues, then TCP,
// hold the workers back.
const resultsHeldMax = 256 << 20

// heldWeight is what a result's data counts against resultsHeldMax.
func heldWeight(data [][]byte) int64 {
	var n int64
	for _, f := range data {
		n += int64(len(f)) + frameCost
	}
	return max(n, 1)
}

// satAdd adds two non-negative sizes, saturating at the largest int64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// writer places results: it finds each one's task and target path, writes the archive to a
// temp file beside the target and reads its report.
func (s *sink) writer(ctx context.Context, inbox <-chan inbound) {
	for in := range inbox {
		s.place(ctx, in)
	}
}

// place is a writer's work on one result. A result whose sender is past its bogus budget is
// parked in the slow lane (guard.go), which places it later; one that arrives while the
// database is away, or whose lookups fail, is held until it is back (outage.go).
func (s *sink) place(ctx context.Context, in inbound) {
	if s.health.down.Load() {
		s.unwritten.Release(in.weight)
		s.holdResult(in)
		return
	}
	pctx, cancel := context.WithTimeout(withPeer(ctx, in.from), s.cfg.DBTimeout)
	it, reason, err := s.prepare(pctx, in)
	cancel()
	if it != nil && recordStages {
		s.noteStages(it, in)
	}
	if errors.Is(err, errParked) {
		if s.slow.park(in) {
			s.sec.limited.Inc()
			return
		}
		reason = "slow_lane_full"
	}
	s.unwritten.Release(in.weight)
	if reason == "db_error" && ctx.Err() == nil {
		s.holdResult(in)
		return
	}
	if it != nil {
		if !s.claims.admit(ctx, it) {
			it.file.Cleanup() // stopped: the task stays in flight for the reaper
		}
		return
	}
	if reason == "write_failed" {
		s.metrics.writeErrors.Inc()
		if n, emit := s.logLimits.writeFailed.Record(); emit {
			s.logger.Error("result archive not written; the task stays for a retry", "count", n,
				"task_id", in.res.TaskID, "error", err)
		}
	}
	s.metrics.discards.WithLabelValues("sink", reason).Inc()
	if n, emit := s.logLimits.dropped.Record(); emit {
		s.logger.Warn("results dropped", "count", n, "reason", reason, "task_id", in.res.TaskID,
			"worker", in.res.Identity, "service", in.res.Service, "peer", in.from.budgetName(), "error", err)
	}
}

// noteStages gives a prepared result the stages measured so far (docs/stages.md): those of this
// replica's hand-out, if it handed the task to the sender, the result's write and parse, and the
// worker's own. A result held through an outage counts the outage in its write stage.
func (s *sink) noteStages(it *item, in inbound) {
	st := queue.NoStages()
	if rep := it.result.Report; rep != nil && rep.Stages != nil {
		st = *rep.Stages // the worker's own
	}
	h := it.handout
	if !h.HandedOut.IsZero() {
		if !h.Reserved.IsZero() {
			st[queue.StageReserved] = max(h.HandedOut.Sub(h.Reserved), 0)
		}
		switch {
		case !h.SourceSent.IsZero() && !h.SourceSent.After(in.received):
			st[queue.StageSource] = max(h.SourceSent.Sub(h.HandedOut), 0)
			st[queue.StageWorker] = in.received.Sub(h.SourceSent)
		case !in.received.IsZero():
			// The result came before the ventilator noted its send done: the round trip counts
			// from the hand-out, the source's time in it.
			st[queue.StageWorker] = max(in.received.Sub(h.HandedOut), 0)
		}
		it.result.ReservedAt = h.Reserved
	}
	if !in.received.IsZero() {
		st[queue.StageWrite] = time.Since(in.received)
	}
	it.result.Stages = &st
}

// placeHeld places a result held through an outage: its receive weight is already released.
func (s *sink) placeHeld(ctx context.Context, in inbound) {
	in.weight = 0
	s.place(ctx, in)
}

// holdResult holds a result until the database is back, or refuses it past the bounds: its
// task then runs again once its lease expires.
func (s *sink) holdResult(in inbound) {
	if s.outage.hold(in) {
		return
	}
	s.metrics.discards.WithLabelValues("sink", "outage_refused").Inc()
	if n, emit := s.logLimits.dropped.Record(); emit {
		s.logger.Warn("results refused: too many held while the database is away; their tasks run again once their leases expire",
			"count", n, "max_results", s.cfg.OutageHeldResults, "max_bytes", s.cfg.OutageHeldBytes)
	}
}

// messageCost is what a parsed message costs in memory beyond the bytes of its fields: the
// queue.Message and its strings' headers and allocation rounding.
const messageCost = 128

// parsedWeight is what a report's messages count against Config.MaxParsedBytes.
func parsedWeight(msgs []queue.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += int64(len(m.Category)+len(m.What)+len(m.Details)) + messageCost
	}
	return n
}

// prepare turns a result message into an item, or says why it is dropped: its task, service
// and corpus found (from the hot mirror's entry and the catalog's caches, else lookUp), its
// report parsed, its archive written to a temp file beside its target.
func (s *sink) prepare(ctx context.Context, in inbound) (*item, string, error) {
	res := in.res
	task, where, known := in.mirror.Task, catalog.Place{}, false
	if in.mirrored {
		where, known = s.catalog.CachedPlace(res.Service, task.CorpusID)
	}
	if !known {
		var reason string
		var err error
		if task, where, reason, err = s.lookUp(ctx, in); err != nil {
			return nil, reason, err
		}
	}
	svc := where.Service
	if task.ServiceID != svc.ID {
		s.sec.charge(in.from, time.Now()) // bogus: its lookup is paid for like a missing task's
		return nil, "wrong_service", fmt.Errorf("task %d belongs to service %d, not %s", res.TaskID, task.ServiceID, svc.Name)
	}
	if in.from.key != "" {
		if reason, err := s.checkHolder(ctx, in); err != nil {
			return nil, reason, err
		}
	}
	it := &item{
		result:  lease.Result{TaskID: res.TaskID, Worker: in.worker, Key: in.from.key, ServiceID: svc.ID},
		file:    archive.Pending{TaskID: res.TaskID, Tag: s.fileTag},
		size:    res.Size,
		from:    in.from,
		service: svc.Name,
	}
	if in.mirrored && in.mirror.Worker == in.worker { // this replica handed the task to the sender
		it.handout = in.mirror
		if it.handout.Pending {
			it.result.HandedOut = it.handout.HandedOut // its claim may be the one recording the attempt
		}
	}
	base := where.Corpus.Path
	it.file.Target = archive.ResultPath(base, task.Entry, svc.Name, where.Corpus.SandboxID)
	if it.file.Target == "" {
		it.result.Kind = lease.KindUnusable
		s.unusableResult(res, "no_result_path",
			fmt.Errorf("no result path for the entry %q (no directory, or not beneath its corpus's path %q)", task.Entry, base))
		return it, "", nil
	}
	if res.Size > s.cfg.MaxResultBytes {
		it.result.Kind = lease.KindReport
		it.result.Status = queue.StatusInvalid
		it.result.Messages = []queue.Message{{Severity: queue.SeverityInvalid, Category: "cortex", What: "result_too_large",
			Details: fmt.Sprintf("worker result of %d bytes exceeded the %d-byte cap", res.Size, s.cfg.MaxResultBytes)}}
		it.file.RemoveOld = true
		it.result.Archive = &lease.ArchiveRecord{Size: -1}
		return it, "", nil
	}
	rep, err := cortexlog.FromReaderAt(framesReader(res.Data), res.Size, cortexlog.Options{MaxMessages: s.cfg.MaxMessages})
	if err != nil {
		it.result.Kind = lease.KindUnusable
		reason := "unreadable"
		if res.Size == 0 {
			reason = "empty" // what a CorTeX worker sends when its conversion crashed
		}
		s.unusableResult(res, reason, err)
		return it, "", nil
	}
	if err := it.file.Write(base, res.Data); err != nil {
		return nil, "write_failed", err
	}
	it.result.Status, it.result.Messages, it.result.Report = rep.Status, rep.Messages, &rep
	it.result.Archive = &lease.ArchiveRecord{Size: it.file.Size, Digest: it.file.Digest}
	if rep.Retryable {
		it.result.Kind = lease.KindRetryable
	}
	return it, "", nil
}

// lookUp finds what prepare needs when the hot mirror or the catalog's caches lack it, from the
// database: the service (an unknown name within the sender's bogus budget: core.service), the
// task (coldlookup.go) and its corpus. It returns the drop reason with an error.
func (s *sink) lookUp(ctx context.Context, in inbound) (queue.Task, catalog.Place, string, error) {
	var where catalog.Place
	svc, err := s.service(ctx, in.res.Service)
	if err != nil {
		switch {
		case errors.Is(err, errBogusBudget):
			return queue.Task{}, where, "unknown_service_rate_limited", err
		case errors.Is(err, queue.ErrNotFound):
			return queue.Task{}, where, "unknown_service", err
		}
		return queue.Task{}, where, "db_error", err
	}
	where.Service = svc
	task := in.mirror.Task
	if !in.mirrored {
		info, err := s.coldTask(ctx, in.res.TaskID) // bounded for bogus ids
		switch {
		case errors.Is(err, errParked):
			return task, where, "", err
		case errors.Is(err, queue.ErrNotFound):
			return task, where, "unknown_task", err
		case err != nil:
			return task, where, "db_error", err
		}
		task = info.Task
	}
	if where.Corpus, err = s.catalog.Corpus(ctx, task.CorpusID); err != nil {
		return task, where, "db_error", err
	}
	return task, where, "", nil
}

// errNotHolder is the error of a result whose sender's key holds no attempt of its task.
var errNotHolder = errors.New("the sender's key holds no attempt of the task")

// checkHolder checks, under CURVE, that the key of the sender holds an attempt of the result's
// task, before its result costs a parse and a temp archive: a key that holds none could
// otherwise make the replica parse results for any task id it learns. The hot mirror's entry
// answers for this replica's lease to that key; otherwise the database does, within the
// sender's bogus budget, and a result from a key that holds no attempt is dropped and charged
// to that budget. It returns the drop reason and an error, or "" and nil. The claim's own
// check (lease.OutcomeNotHolder) stays the authority: this one only saves the work.
func (s *sink) checkHolder(ctx context.Context, in inbound) (string, error) {
	p, id := in.from, in.res.TaskID
	if in.mirrored && strings.HasPrefix(in.mirror.Worker, lease.KeyedWorker(p.key, "")) {
		return "", nil
	}
	now := time.Now()
	if s.sec.spent(p, now) {
		return "not_holder_rate_limited", fmt.Errorf("task %d: %w", id, errBogusBudget)
	}
	held, err := s.store.KeyHoldsAttempt(ctx, id, p.key)
	s.health.record("lookup", err)
	if err != nil {
		return "db_error", err
	}
	if !held {
		s.sec.charge(p, now)
		return "not_holder", fmt.Errorf("task %d, key %s: %w", id, p.key, errNotHolder)
	}
	return "", nil
}

// framesReader reads a message's data frames as one byte stream.
type framesReader [][]byte

// ReadAt implements io.ReaderAt over the concatenated frames.
func (fr framesReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for _, f := range fr {
		if off >= int64(len(f)) {
			off -= int64(len(f))
			continue
		}
		c := copy(p[n:], f[off:])
		n += c
		off = 0
		if n == len(p) {
			return n, nil
		}
	}
	return n, io.EOF
}
