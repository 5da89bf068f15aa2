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

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/cortexlog"
	"github.com/cortexq/cortexq/queue/hot"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/wire"
)

// inbound is a parsed result message.
type inbound struct {
	res    wire.Result
	from   peer
	weight int64 // held against Server.held until the writer is done with res.Data
	// wasHeld: the result has been held for the database's return (outage.go) at least once.
	wasHeld bool
	// received is when the result came in whole (monotonic clock): the end of its worker stage.
	received time.Time
}

// item is a result ready to be claimed: its reply for the lease state machine and what
// publishing it means on disk.
type item struct {
	result lease.Result
	file   archive.Pending // the result's archive, on its way into place
	size   int64
	from   peer
	weight int64 // held against Server.parsed until the item's claim is over
	// service is the name of the task's service (cortexq_results_total's label).
	service string
	// queued is when the item was handed to the claimers (zero: now); the claim batch it
	// opens waits for more only until ClaimFlush after it.
	queued time.Time
	// handout is the mirror's entry of this replica's hand-out of the task to the sender, if
	// any: its stage marks (noteStages).
	handout hot.Task
	// workerStages are the stages the worker reported in its cortex.log (nil: none).
	workerStages *queue.Stages
}

// receiver owns the PULL socket: it parses result messages and hands them to the writers.
// What it has handed over and the writers have not yet written is bounded by s.unwritten.
func (s *Server) receiver(ctx context.Context, pull *zmq.Socket, inbox chan<- inbound) error {
	defer close(inbox)
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
		s.hot.Answered(res.TaskID, msg.from.worker(res.Identity))
		weight := min(heldWeight(res.Data), resultsHeldMax)
		if err := s.unwritten.Acquire(ctx, weight); err != nil {
			return nil
		}
		select {
		case inbox <- inbound{res: res, from: msg.from, weight: weight, received: received}:
		case <-ctx.Done():
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
func (s *Server) writer(ctx context.Context, inbox <-chan inbound, out chan<- *item) {
	for in := range inbox {
		s.place(ctx, in, out)
	}
}

// place is a writer's work on one result. A result whose sender is past its bogus budget is
// parked in the slow lane (guard.go), which places it later; one that arrives while the
// database is away, or whose lookups fail, is held until it is back (outage.go).
func (s *Server) place(ctx context.Context, in inbound, out chan<- *item) {
	if s.health.isDown() {
		s.unwritten.Release(in.weight)
		s.holdResult(in)
		return
	}
	pctx, cancel := context.WithTimeout(withPeer(ctx, in.from), s.cfg.DBTimeout)
	it, reason, err := s.prepare(pctx, in.res)
	cancel()
	if it != nil && recordStages() {
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
		s.queueItem(ctx, in, it, out)
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
func (s *Server) noteStages(it *item, in inbound) {
	st := queue.NoStages()
	if it.workerStages != nil {
		st = *it.workerStages
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
func (s *Server) placeHeld(ctx context.Context, in inbound, out chan<- *item) {
	in.weight = 0
	s.place(ctx, in, out)
}

// queueItem hands a prepared result to the claimers, within the budget of parsed reports.
func (s *Server) queueItem(ctx context.Context, in inbound, it *item, out chan<- *item) {
	in.from.stamp(&it.result)
	it.from = in.from
	// The claimer releases the weight and never waits for it, so this wait ends.
	it.weight = min(parsedWeight(it.result.Messages), s.cfg.MaxParsedBytes)
	if err := s.parsed.Acquire(ctx, it.weight); err != nil {
		it.file.Cleanup() // stopped: the task stays in flight for the reaper
		return
	}
	s.parsedBytes.Add(it.weight)
	it.queued = time.Now()
	it.result.Queued = it.queued
	out <- it
}

// holdResult holds a result until the database is back, or refuses it past the bounds: its
// task then runs again once its lease expires.
func (s *Server) holdResult(in inbound) {
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

// prepare turns a result message into an item, or says why it is dropped.
func (s *Server) prepare(ctx context.Context, res wire.Result) (*item, string, error) {
	svc, err := s.service(ctx, res.Service)
	if err != nil {
		switch {
		case errors.Is(err, errBogusBudget):
			return nil, "unknown_service_rate_limited", err
		case errors.Is(err, queue.ErrNotFound):
			return nil, "unknown_service", err
		}
		return nil, "db_error", err
	}
	task, err := s.taskOf(ctx, res.TaskID)
	if errors.Is(err, errParked) {
		return nil, "", err
	}
	if err != nil {
		if errors.Is(err, queue.ErrNotFound) {
			return nil, "unknown_task", err
		}
		return nil, "db_error", err
	}
	if task.ServiceID != svc.ID {
		s.sec.charge(peerOf(ctx), time.Now()) // bogus: its lookup is paid for like a missing task's
		return nil, "wrong_service", fmt.Errorf("task %d belongs to service %d, not %s", res.TaskID, task.ServiceID, svc.Name)
	}
	if reason, err := s.checkHolder(ctx, res.TaskID); err != nil {
		return nil, reason, err
	}
	it := &item{
		result:  lease.Result{TaskID: res.TaskID, Worker: res.Identity, ServiceID: svc.ID},
		file:    archive.Pending{TaskID: res.TaskID, Tag: s.fileTag},
		size:    res.Size,
		service: svc.Name,
	}
	// The mirror names the worker as the ventilator did: under CURVE prefixed with its key.
	if it.handout = s.handOutOf(ctx, res); it.handout.Pending {
		it.result.HandedOut = it.handout.HandedOut // its claim may be the one recording the attempt
	}
	base, err := s.catalog.CorpusPath(ctx, task.CorpusID)
	if err != nil {
		return nil, "db_error", err
	}
	it.file.Target = archive.ResultPath(base, task.Entry, svc.Name, task.SandboxID)
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
	it.result.Status, it.result.Messages = rep.Status, rep.Messages
	it.workerStages = rep.Stages
	it.result.Archive = &lease.ArchiveRecord{Size: it.file.Size, Digest: it.file.Digest}
	if rep.Retryable {
		it.result.Kind = lease.KindRetryable
	}
	return it, "", nil
}

// handOutOf is the mirror's entry of this replica's hand-out of the result's task to its sender
// (the peer of ctx), if it has one.
func (s *Server) handOutOf(ctx context.Context, res wire.Result) hot.Task {
	if h, ok := s.hot.Get(res.TaskID); ok && h.Worker == peerOf(ctx).worker(res.Identity) {
		return h
	}
	return hot.Task{}
}

// errNotHolder is the error of a result whose sender's key holds no attempt of its task.
var errNotHolder = errors.New("the sender's key holds no attempt of the task")

// checkHolder checks, under CURVE, that the key of the sender (the peer of ctx) holds an
// attempt of task id, before its result costs a parse and a temp archive: a key that holds
// none could otherwise make the replica parse results for any task id it learns. The hot
// mirror answers for this replica's lease to that key; otherwise the database does, within the
// sender's bogus budget, and a result from a key that holds no attempt is dropped and charged
// to that budget. It returns the drop reason and an error, or "" and nil. The claim's own
// check (lease.OutcomeNotHolder) stays the authority: this one only saves the work.
func (s *Server) checkHolder(ctx context.Context, id int64) (string, error) {
	p := peerOf(ctx)
	if p.key == "" {
		return "", nil
	}
	if t, ok := s.hot.Get(id); ok && strings.HasPrefix(t.Worker, lease.KeyedWorker(p.key, "")) {
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

// taskOf finds a task in the hot mirror, else in the database.
func (s *Server) taskOf(ctx context.Context, id int64) (lease.TaskInfo, error) {
	if t, ok := s.hot.Get(id); ok {
		sandbox, err := s.catalog.SandboxID(ctx, t.CorpusID)
		if err != nil {
			return lease.TaskInfo{}, err
		}
		return lease.TaskInfo{Task: t.Task, SandboxID: sandbox}, nil
	}
	return s.coldTask(ctx, id) // bounded for bogus ids: coldlookup.go
}

// claimer decides batches of items in claim transactions. poke wakes the ventilator's loop:
// after a claim, if the loop held hand-outs back for the sink's backlog.
func (s *Server) claimer(ctx context.Context, in <-chan *item, poke func()) {
	batch := make([]*item, 0, s.cfg.ClaimBatch)
	var last time.Duration // the last claim's time
	for {
		// The relay: one claimer at a time gathers a batch and reads it. It hands on once its
		// writes and COMMIT are on their way if its reads took relayAfter or more (a distant
		// database: the next claim's round trips then overlap its commit), else once it is over.
		s.claimFront.Lock()
		it, ok := <-in
		if !ok {
			s.claimFront.Unlock()
			return
		}
		batch = append(batch[:0], it)
		weight := it.weight
		// The batch takes the results already queued, then waits for more until its first has
		// waited ClaimFlush (times the replicas' share: claimWait) since it was queued: a first
		// that waited through the claim before goes at once. (Waiting ClaimFlush after the pickup added it to every wait behind a
		// claim: at a steady 1,000 results/s the lease → result tail, docs/performance.md.)
		wait := s.claimWait(last)
		if !it.queued.IsZero() {
			wait -= time.Since(it.queued)
		}
		timer := time.NewTimer(max(wait, 0))
	fill:
		for len(batch) < s.cfg.ClaimBatch && weight < claimBatchWeight {
			var next *item
			select {
			case next, ok = <-in:
			default:
				select {
				case next, ok = <-in:
				case <-timer.C:
					break fill
				}
			}
			if !ok {
				break fill
			}
			batch = append(batch, next)
			weight += next.weight
		}
		timer.Stop()
		held := s.claiming.lock(batch)
		began := time.Now()
		handOn := sync.OnceFunc(s.claimFront.Unlock)
		s.claim(ctx, batch, func(reads time.Duration) {
			if reads >= relayAfter {
				handOn()
			}
		})
		handOn()
		last = time.Since(began)
		s.claiming.unlock(held)
		for _, it := range batch {
			s.parsed.Release(it.weight)
			s.parsedBytes.Add(-it.weight)
		}
		if s.backpressured.CompareAndSwap(true, false) {
			poke()
		}
	}
}

// claimShareMax bounds the replicas' share a claim's wait counts (claimWait), and
// claimWaitMax the wait it adds: two fifths of the attribution delay, so that a result's claim
// still comes before its hand-out needs an attribution statement.
const (
	claimShareMax = 4
	claimWaitMax  = attributeDelay * 2 / 5
)

// claimWait is how long a claim batch waits for more results after its first was queued. One
// replica alone waits ClaimFlush; the results that came during its last claim are in the batch
// too. Where this replica has 1/share of its services' demand (claimShare), a batch waits
// as long as it takes to gather what one replica serving the whole demand would: share times
// ClaimFlush and the last claim's time together, less the last claim's time (already waited),
// at most claimWaitMax more than ClaimFlush (docs/performance.md#replicas-sharing-one-database).
func (s *Server) claimWait(last time.Duration) time.Duration {
	share := 1.0
	if b := s.claimShare.Load(); b != 0 {
		share = math.Float64frombits(b)
	}
	if s.cfg.ClaimFlush == 0 {
		return 0 // no wait asked for
	}
	extra := time.Duration((share - 1) * float64(s.cfg.ClaimFlush+last))
	return s.cfg.ClaimFlush + min(extra, claimWaitMax)
}

// claimBatchWeight bounds the messages one claim transaction writes (in parsedWeight, past its
// first result): results with many long messages are claimed a few at a time, so that no claim
// runs long while the results behind it wait (docs/performance.md#claim-batch-weight).
const claimBatchWeight = 2 << 20

// claimRetries is how often a claim that fails while the database answers is tried again.
const claimRetries = 20

// relayAfter is the first round trip of a claim from which it hands on to the next claimer
// before its commit (Server.claimer): the database is far enough that overlapping the next
// claim's round trips with this one's commit pays. On a nearer link the next claim gathers
// until this one is over, as with one claimer, and its batch is not halved: on loopback a relay
// at every claim costs PostgreSQL CPU for nothing (docs/performance.md#the-claim-relay).
const relayAfter = 5 * time.Millisecond

// claim runs one claim transaction for batch, retrying it while the database is away (within
// the outage budget); results that cannot be claimed stay with the reaper. writing is called
// once a try's writes are under way, with how long its first round trip took
// (lease.ClaimHooks.Writing).
func (s *Server) claim(ctx context.Context, batch []*item, writing func(reads time.Duration)) {
	results := make([]lease.Result, len(batch))
	index := make(map[*lease.Result]*item, len(batch))
	for i, it := range batch {
		results[i] = it.result
		index[&results[i]] = it
	}
	// pubs are the batch's publishes in the order they were made: two accepted results of one
	// task in a batch publish to the same target, and undoing them must go in reverse.
	pubs := &publishes{}
	hooks := lease.ClaimHooks{Publish: func(d *lease.Decision) error {
		it := index[d.Result]
		if it.file.Published() {
			return nil // published by an earlier try of the same claim
		}
		if err := it.file.Publish(); err != nil {
			return err
		}
		pubs.order = append(pubs.order, it)
		return nil
	}, Stocked: s.stocks.has, Writing: writing}
	if s.cfg.SyncArchives {
		// One syncfs per file system for the whole batch, after the renames and before the
		// commit: a recorded result's archive is on disk, at a fraction of a fsync per file.
		files := make([]*archive.Pending, len(batch))
		for i, it := range batch {
			files[i] = &it.file
		}
		hooks.BeforeCommit = func() error { return archive.SyncPublished(files) }
	}
	dbctx := context.WithoutCancel(ctx)
	var decisions []lease.Decision
	var err error
	// While the database is away the claim is tried again until the outage budget is spent (the
	// outage's log lines say so, not each try); otherwise claimRetries times.
	for attempt := 0; ; attempt++ {
		start := time.Now()
		tctx, cancel := context.WithTimeout(dbctx, s.cfg.DBTimeout)
		decisions, err = s.store.ClaimWithHooks(tctx, results, hooks)
		cancel()
		s.health.record("claim", err)
		s.metrics.claimSeconds.Observe(time.Since(start).Seconds())
		if err == nil || s.health.expired() || (attempt >= claimRetries && !s.health.isDown()) {
			break
		}
		s.unpublishAfter(pubs, err)
		s.metrics.dbErrors.WithLabelValues("claim").Inc()
		time.Sleep(min(time.Duration(attempt+1)*250*time.Millisecond, 2*time.Second))
	}
	s.metrics.claimBatch.Observe(float64(len(batch)))
	if err != nil {
		s.logger.Error("claim failed; the tasks stay in flight for the reaper", "results", len(batch), "error", err)
		s.unpublishAfter(pubs, err)
		for _, it := range batch {
			it.file.Cleanup()
		}
		return
	}
	s.afterCommit(decisions, index)
}

// afterCommit counts and logs a committed claim's decisions, drops the decided tasks from the hot
// cache and cleans up each result's staged archive.
func (s *Server) afterCommit(decisions []lease.Decision, index map[*lease.Result]*item) {
	for i := range decisions {
		d := &decisions[i]
		it := index[d.Result]
		s.metrics.claims.WithLabelValues(string(d.Outcome)).Inc()
		if d.AttributedAtClaim {
			s.metrics.attributedAtClaim.Inc()
		}
		s.chargeOutcome(it.from, d.Outcome)
		if d.Outcome == lease.OutcomeAccepted || d.Outcome == lease.OutcomeFinal {
			s.metrics.results.WithLabelValues(it.service, d.Status.String()).Inc()
			s.metrics.observeStages(it)
		}
		switch d.Outcome {
		case lease.OutcomeAccepted, lease.OutcomeFinal, lease.OutcomeDeferred, lease.OutcomeUnusable:
			s.hot.Delete(d.TaskID)
		case lease.OutcomePublishFail:
			s.metrics.publishFails.Inc()
		}
		if d.Outcome != lease.OutcomeAccepted && d.Outcome != lease.OutcomeFinal {
			s.logger.Debug("reply not recorded", "task_id", d.TaskID, "worker", d.Result.Worker,
				"outcome", d.Outcome, "reason", d.Reason)
		} else if d.Late != lease.LateNone {
			// At most a line per 5 s: after an outage, or a worker link that held results, they
			// come by the hundred.
			if n, emit := s.logLimits.late.Record(); emit {
				s.logger.Info("late results recorded", "count", n, "task_id", d.TaskID, "worker", d.Result.Worker,
					"attempt", d.Attempt, "late", d.Late)
			}
		}
		it.file.Cleanup()
	}
}

// publishes are a claim's archive publishes, in order, over its tries.
type publishes struct {
	order []*item
	// kept is set once a try failed in a way that may have committed: from then on, nothing
	// published is undone, since its claim may stand in the database.
	kept bool
}

// unpublishAfter undoes the claim's publishes, latest first, after a try that failed with err,
// if no try so far may have committed (lease.RolledBack): a claim that committed and lost its
// answer must not lose its archives too, even when a later try fails for certain.
func (s *Server) unpublishAfter(pubs *publishes, err error) {
	if !lease.RolledBack(err) {
		pubs.kept = true
	}
	if pubs.kept {
		return
	}
	for i := len(pubs.order) - 1; i >= 0; i-- {
		it := pubs.order[i]
		if uerr := it.file.Unpublish(); uerr != nil {
			s.logger.Error("claim rolled back, but an archive could not be put back", "task_id", it.result.TaskID,
				"target", it.file.Target, "error", uerr)
		}
	}
	pubs.order = pubs.order[:0]
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
