package dispatch

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/internal/startstop"
	"github.com/cortexq/cortexq/queue/lease"
)

// claimers is the service of the claim relay: Claimers goroutines that take the writers'
// items, gather them in batches and decide each batch in one claim transaction (lease.Store).
type claimers struct {
	*core
	vent *ventilator // woken after a claim that shrank the backlog it waited on
	in   chan *item  // the writers' items, and the ventilator's unusable hand-outs
	// claiming keeps the claimers off each other's tasks (claimLocks, below); front is held by the
	// claimer gathering and reading a batch (the relay: claimer), and guards later (results held
	// back from a batch that had their task, for the next batch any claimer gathers: gather) and
	// batched.
	claiming claimLocks
	front    sync.Mutex
	later    []*item
	batched  map[int64]bool // the tasks of the batch being gathered (gather), kept for reuse
	// share is the replicas' demand over this replica's, all services together, as float64
	// bits (ventilator.shares): a claimer waits for its batch ClaimFlush times this
	// (claimWait). Zero: 1.
	share atomic.Uint64
	// backpressured is set when the ventilator held hand-outs back for the sink's backlog
	// (ventilator.serve): the claimer that next shrinks the backlog wakes the ventilator's loop,
	// whose waiting requests would otherwise wait for a poll interval.
	backpressured atomic.Bool
	// parsed is the budget of parsed reports not yet claimed (Config.MaxParsedBytes), in
	// parsedWeight; parsedBytes is what is taken of it, for the metric.
	parsed      *semaphore.Weighted
	parsedBytes atomic.Int64
	wg          sync.WaitGroup
}

func newClaimers(c *core) *claimers {
	return &claimers{core: c, in: make(chan *item, c.cfg.ClaimBatch*2), parsed: semaphore.NewWeighted(c.cfg.MaxParsedBytes)}
}

// claimersService starts the claimers; its stop closes their input, once the writers and the
// ventilator have stopped, and waits until every item handed to them is claimed or dropped.
type claimersService struct {
	s    *claimers
	z    *zmqContext
	fail context.CancelCauseFunc
}

func (s *claimers) service(z *zmqContext, fail context.CancelCauseFunc) startstop.Service {
	return &claimersService{s: s, z: z, fail: fail}
}

// Start starts the claimers, each with a socket that pokes the ventilator's loop.
func (c *claimersService) Start(ctx context.Context) error {
	s := c.s
	for range s.cfg.Claimers {
		s.wg.Go(func() {
			err := s.vent.withPoke(c.z.Context, func(poke func()) { s.claimer(ctx, s.in, poke) })
			if err != nil {
				c.fail(err)
				s.claimer(ctx, s.in, func() {}) // the results still need their claims
			}
		})
	}
	return nil
}

// Stop closes the claimers' input and waits for them.
func (c *claimersService) Stop() {
	close(c.s.in)
	c.s.wg.Wait()
}

// admit hands a prepared result to the claimers, within the budget of parsed reports. It
// reports false when ctx ended first.
func (s *claimers) admit(ctx context.Context, it *item) bool {
	// The claimer releases the weight and never waits for it, so this wait ends.
	it.weight = min(parsedWeight(it.result.Messages), s.cfg.MaxParsedBytes)
	if err := s.parsed.Acquire(ctx, it.weight); err != nil {
		return false
	}
	s.parsedBytes.Add(it.weight)
	it.queued = time.Now()
	it.result.Queued = it.queued
	s.in <- it
	return true
}

// noteUnusable records, through the claimers, that a lease's worker got no payload.
func (s *claimers) noteUnusable(l lease.Lease) {
	it := &item{result: lease.Result{TaskID: l.TaskID, Worker: l.Worker, ServiceID: l.ServiceID, Kind: lease.KindUnusable}}
	select {
	case s.in <- it:
	default: // the claimers are full: the reaper still moves the task on at its deadline
		if n, emit := s.logLimits.unusableDropped.Record(); emit {
			s.logger.Warn("claimers busy: a lease whose worker got no payload is left to its deadline",
				"count", n, "task_id", l.TaskID, "worker", l.Worker)
		}
	}
}

// claimer decides batches of items in claim transactions. poke wakes the ventilator's loop:
// after a claim, if the loop held hand-outs back for the sink's backlog.
func (s *claimers) claimer(ctx context.Context, in <-chan *item, poke func()) {
	batch := make([]*item, 0, s.cfg.ClaimBatch)
	var last time.Duration // the last claim's time
	for {
		// The relay: one claimer at a time gathers a batch and reads it. It hands on once its
		// writes and COMMIT are on their way if its reads took relayAfter or more (a distant
		// database: the next claim's round trips then overlap its commit), else once it is over.
		s.front.Lock()
		batch = s.gather(in, batch[:0], last)
		if len(batch) == 0 {
			s.front.Unlock()
			return
		}
		held := s.claiming.lock(batch)
		began := time.Now()
		handOn := sync.OnceFunc(s.front.Unlock)
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

// gather fills batch, first from s.later (results held back from a batch before), then from in,
// and returns it; the caller holds s.front. A claim takes one result per task
// (lease.Store.BeginClaim), so a result of a task already in the batch is held back in s.later
// for the next batch, in the order it came, whichever claimer gathers it (held by one claimer,
// it would wait while another waits on in). An empty batch: in is closed and nothing is held
// back.
//
// The batch takes the results already queued, then waits for more until its first has waited
// ClaimFlush (times the replicas' share: claimWait) since it was queued: a first that waited
// through the claim before goes at once. (Waiting ClaimFlush after the pickup added it to every
// wait behind a claim: at a steady 1,000 results/s the lease → result tail,
// docs/performance.md.) last is the last claim's time.
func (s *claimers) gather(in <-chan *item, batch []*item, last time.Duration) []*item {
	held, later := s.later, []*item(nil)
	defer func() { s.later = later }()
	if s.batched == nil {
		s.batched = make(map[int64]bool, s.cfg.ClaimBatch)
	}
	tasks := s.batched
	clear(tasks)
	var weight int64
	// add puts it in the batch, or holds it back, and reports whether the batch has room.
	add := func(it *item) bool {
		if id := it.result.TaskID; id > 0 && tasks[id] {
			later = append(later, it)
		} else {
			tasks[id] = true
			batch = append(batch, it)
			weight += it.weight
		}
		return len(batch) < s.cfg.ClaimBatch && weight < claimBatchWeight
	}
	room := true
	for i, it := range held {
		if !room {
			later = append(later, held[i:]...)
			break
		}
		room = add(it)
	}
	if len(batch) == 0 {
		it, ok := <-in
		if !ok {
			return batch
		}
		room = add(it)
	}
	wait := s.claimWait(last)
	if first := batch[0]; !first.queued.IsZero() {
		wait -= time.Since(first.queued)
	}
	timer := time.NewTimer(max(wait, 0))
	defer timer.Stop()
	for room {
		var next *item
		var ok bool
		select {
		case next, ok = <-in:
		default:
			select {
			case next, ok = <-in:
			case <-timer.C:
				return batch
			}
		}
		if !ok {
			return batch
		}
		room = add(next)
	}
	return batch
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
// too. Where this replica has 1/share of its services' demand (claimers.share), a batch waits
// as long as it takes to gather what one replica serving the whole demand would: share times
// ClaimFlush and the last claim's time together, less the last claim's time (already waited),
// at most claimWaitMax more than ClaimFlush (docs/performance.md#replicas-sharing-one-database).
func (s *claimers) claimWait(last time.Duration) time.Duration {
	share := 1.0
	if b := s.share.Load(); b != 0 {
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
// before its commit (claimers.claimer): the database is far enough that overlapping the next
// claim's round trips with this one's commit pays. On a nearer link the next claim gathers
// until this one is over, as with one claimer, and its batch is not halved: on loopback a relay
// at every claim costs PostgreSQL CPU for nothing (docs/performance.md#the-claim-relay).
const relayAfter = 5 * time.Millisecond

// claim runs one claim transaction for batch, retrying it while the database is away (within
// the outage budget); results that cannot be claimed stay with the reaper. writing is called
// once a try's writes are under way, with how long its first round trip took (lease.Claim.Reads).
func (s *claimers) claim(ctx context.Context, batch []*item, writing func(reads time.Duration)) {
	results := make([]lease.Result, len(batch))
	index := make(map[*lease.Result]*item, len(batch))
	for i, it := range batch {
		results[i] = it.result
		index[&results[i]] = it
	}
	// pubs are the batch's publishes in the order they were made, over its tries: undoing them
	// goes in reverse.
	pubs := &publishes{}
	dbctx := context.WithoutCancel(ctx)
	var decisions []lease.Decision
	var err error
	var rolledBack bool // the last try certainly did not commit
	// While the database is away the claim is tried again until the outage budget is spent (the
	// outage's log lines say so, not each try); otherwise claimRetries times.
	for attempt := 0; ; attempt++ {
		start := time.Now()
		tctx, cancel := context.WithTimeout(dbctx, s.cfg.DBTimeout)
		decisions, rolledBack, err = s.claimTry(tctx, batch, results, index, pubs, writing)
		cancel()
		s.health.record("claim", err)
		s.metrics.claimSeconds.Observe(time.Since(start).Seconds())
		if err == nil || s.health.expired() || (attempt >= claimRetries && !s.health.down.Load()) {
			break
		}
		s.unpublishAfter(pubs, rolledBack)
		s.metrics.dbErrors.WithLabelValues("claim").Inc()
		time.Sleep(min(time.Duration(attempt+1)*250*time.Millisecond, 2*time.Second))
	}
	s.metrics.claimBatch.Observe(float64(len(batch)))
	if err != nil {
		s.logger.Error("claim failed; the tasks stay in flight for the reaper", "results", len(batch), "error", err)
		s.unpublishAfter(pubs, rolledBack)
		for _, it := range batch {
			it.file.Cleanup()
		}
		return
	}
	s.afterCommit(decisions, index)
}

// claimTry is one try of a claim, in the claim's steps (lease.Claim): the decisions made, each
// accepted result's archive published (an archive an earlier try published is not published
// again), the archives made durable (Config.SyncArchives), the relay handed on (writing), the
// writes and COMMIT sent. A failed try reports whether it certainly did not commit: the
// database said so (lease.RolledBack), or it ended before its Commit.
func (s *claimers) claimTry(ctx context.Context, batch []*item, results []lease.Result, index map[*lease.Result]*item,
	pubs *publishes, writing func(reads time.Duration)) ([]lease.Decision, bool, error) {
	c, err := s.store.BeginClaim(ctx, results, s.stocks.has)
	if err != nil {
		return nil, true, err // no COMMIT was sent
	}
	defer c.Rollback()
	var unpublished map[*lease.Decision]error // the publishes that failed, for the commit
	for _, d := range c.ToPublish {
		it := index[d.Result]
		if it.file.Published() {
			continue // published by an earlier try of the same claim
		}
		if err := it.file.Publish(); err != nil {
			if unpublished == nil {
				unpublished = map[*lease.Decision]error{}
			}
			unpublished[d] = err
			continue
		}
		pubs.order = append(pubs.order, it)
	}
	if s.cfg.SyncArchives {
		// One syncfs per file system for the whole batch, after the renames and before the
		// commit: a recorded result's archive is on disk, at a fraction of a fsync per file.
		files := make([]*archive.Pending, len(batch))
		for i, it := range batch {
			files[i] = &it.file
		}
		if err := archive.SyncPublished(files); err != nil {
			return nil, true, fmt.Errorf("claim: sync the published archives: %w", err)
		}
	}
	writing(c.Reads)
	decisions, err := c.Commit(ctx, unpublished)
	return decisions, err != nil && lease.RolledBack(err), err
}

// afterCommit counts and logs a committed claim's decisions, drops the decided tasks from the hot
// cache and cleans up each result's staged archive.
func (s *claimers) afterCommit(decisions []lease.Decision, index map[*lease.Result]*item) {
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

// unpublishAfter undoes the claim's publishes, latest first, after a try that failed, if no
// try so far may have committed (rolledBack: this one certainly did not): a claim that
// committed and lost its answer must not lose its archives too, even when a later try fails
// for certain.
func (s *claimers) unpublishAfter(pubs *publishes, rolledBack bool) {
	if !rolledBack {
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

// claimLocks keeps two claims of this replica (Config.Claimers) off the same task at once. The
// database orders their decisions by the task's row lock, but not what a claim does with files
// outside its transaction: a claim that rolled back puts the archives it published back after
// its ROLLBACK, when another claim may already hold the task and have published over them.
type claimLocks struct {
	mu   sync.Mutex
	held map[int64]chan struct{} // closed when its claim is over
}

// lock waits until no other claim holds any task of batch, then holds them all; it returns the
// tasks for unlock. All or none are taken, so two claims never wait for each other.
func (l *claimLocks) lock(batch []*item) []int64 {
	ids := make([]int64, len(batch))
	for i, it := range batch {
		ids[i] = it.result.TaskID
	}
	for {
		l.mu.Lock()
		var busy chan struct{}
		for _, id := range ids {
			if c, ok := l.held[id]; ok {
				busy = c
				break
			}
		}
		if busy == nil {
			if l.held == nil {
				l.held = map[int64]chan struct{}{}
			}
			mine := make(chan struct{})
			for _, id := range ids {
				l.held[id] = mine
			}
			l.mu.Unlock()
			return ids
		}
		l.mu.Unlock()
		<-busy
	}
}

// unlock releases the tasks lock returned.
func (l *claimLocks) unlock(ids []int64) {
	l.mu.Lock()
	var mine chan struct{}
	for _, id := range ids {
		if c, ok := l.held[id]; ok {
			mine = c
			delete(l.held, id)
		}
	}
	l.mu.Unlock()
	if mine != nil {
		close(mine)
	}
}
