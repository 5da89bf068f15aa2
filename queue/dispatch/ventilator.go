package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/hot"
	"github.com/cortexq/cortexq/queue/internal/startstop"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/wire"
)

// request is a worker waiting for a task.
type request struct {
	identity []byte
	worker   string
	key      string    // the name of its CURVE key ("" in plain mode)
	at       time.Time // when it came in
}

// requestWait bounds how long a request waits for its reply. An upstream CorTeX worker gives
// up on a request left unanswered for about a minute (and sleeps a minute after a no-work
// reply): while the database is slow or away, a request gets no work after requestWait rather
// than that wait, and leases made for it later are returned.
const requestWait = 3 * time.Second

// cappedRequest is a request of a worker at its cap. The hot mirror may still count leases
// whose results another replica took, or is about to take, or that expired: the request waits
// for the mirror's resyncs to tell, up to capHold, before it is refused.
type cappedRequest struct {
	service catalog.Service
	req     *request
	after   uint64    // the request is looked at again once resyncs.done reaches after
	until   time.Time // then refused, if its worker is still at its cap
}

// capHold is how long a request at its worker's cap waits for the worker's leases to be
// answered: longer than a result takes from a worker's PUSH socket to its claim on any
// replica (a slow lane included), so that an honest worker whose last results are still on
// their way is served, not refused and made to sleep out its throttle.
const capHold = 2 * time.Second

// capResyncAfter is how long a request at its worker's cap waits for the worker's reply before
// it asks for a resync of the hot mirror: a worker whose requests outrun its replies through a
// busy sink is common, and each resync reads every row this replica has in flight.
const capResyncAfter = 50 * time.Millisecond

// requestLimits keeps a request's identity and service frames; any later ones are dropped.
var requestLimits = frameLimits{headers: 2}

// ventilator owns the ROUTER socket: it gathers requests, hands them in batches to the leasers
// and streams the leased payloads. Only its goroutine touches the socket.
type ventilator struct {
	s       *core
	claims  *claimers   // woken by the ventilator's unusable hand-outs, sharing its demand
	upkeep  *upkeep     // the hot mirror's resyncs, asked for by requests at their cap
	attrib  *attributor // writes the hand-outs' workers (attribute.go)
	router  *zmq.Socket
	wake    *zmq.Socket
	wakeEP  string
	jobs    chan leaseJob
	done    chan leaseDone
	pending map[int32]*pendingService
	order   []int32 // services with pending requests, oldest first
	waiting map[string]bool
	queued  int // requests pending or being leased
	// asking and askingKey count the requests pending or being leased per worker and per key,
	// which the caps count with the leases held.
	asking    map[string]int
	askingKey map[string]int
	capped    []cappedRequest
	chunker   *wire.Chunker
	src       []byte // the source archive being sent (readSource)
	discard   *wire.RateLimiter
	sendErr   *wire.RateLimiter
	capLog    *wire.RateLimiter

	// stock holds each service's reserved tasks (stock.go); pendingRelease what a stop or
	// the stock's age gave back while no leaser was free; lastCheck when the stock was last
	// checked against the database.
	stock          map[int32]*stock
	pendingRelease []lease.Reserved
	lastCheck      time.Time
	// lastDemand is when the demand was last noted, demandFrom when it was first counted
	// (noteDemand).
	lastDemand, demandFrom time.Time
	// lookupFailed is when a service lookup last failed, with lookupErr (lookupService).
	lookupFailed time.Time
	lookupErr    error

	// stopLeasing is set by Server.StopLeasing. leasing counts the reservation jobs (reserve,
	// release, check) not yet delivered: Drain waits for them too.
	stopLeasing atomic.Bool
	leasing     atomic.Int32
	// tracked are the sizes of the per-identity tables, published by the loop for the
	// cortexq_identity_entries gauges (metrics.go).
	tracked struct{ waiting, asking, askingKey, capped atomic.Int64 }
	loop    sync.WaitGroup // the loop and the leasers
	cancel  context.CancelFunc
}

type pendingService struct {
	service catalog.Service
	reqs    []*request // oldest first
}

func newVentilator(c *core, claims *claimers, u *upkeep) *ventilator {
	v := &ventilator{
		s: c, claims: claims, upkeep: u,
		jobs:      make(chan leaseJob, c.cfg.Leasers),
		done:      make(chan leaseDone, c.cfg.Leasers),
		pending:   map[int32]*pendingService{},
		waiting:   map[string]bool{},
		asking:    map[string]int{},
		askingKey: map[string]int{},
		chunker:   wire.NewChunker(c.cfg.MessageSize),
		discard:   wire.NewRateLimiter(5 * time.Second),
		sendErr:   wire.NewRateLimiter(5 * time.Second),
		capLog:    wire.NewRateLimiter(5 * time.Second),
		stock:     map[int32]*stock{},
	}
	v.attrib = newAttributor(c)
	return v
}

// sockets is the service of the ventilator's ROUTER socket and the wake socket its loop polls.
func (v *ventilator) sockets(z *zmqContext) startstop.Service {
	return startstop.Funcs(func(context.Context) (func(), error) {
		if err := v.open(z.Context); err != nil {
			return nil, err
		}
		return v.close, nil
	})
}

// service is the service of the leasers and the ventilator's loop: its stop ends the loop,
// which refuses the requests waiting and gives the stock back through the leasers first; the
// leasers end once the loop has closed their jobs.
func (v *ventilator) service(z *zmqContext, fail context.CancelCauseFunc) startstop.Service {
	return startstop.Funcs(func(ctx context.Context) (func(), error) {
		ctx, v.cancel = context.WithCancel(ctx)
		for range v.s.cfg.Leasers {
			v.loop.Go(func() {
				if err := v.runLeaser(ctx, z.Context); err != nil {
					fail(err)
				}
			})
		}
		v.loop.Go(func() {
			if err := v.run(ctx); err != nil {
				fail(err)
			}
		})
		return func() { v.cancel(); v.loop.Wait() }, nil
	})
}

// open makes the ROUTER socket and the wake socket.
func (v *ventilator) open(zctx *zmq.Context) error {
	s := v.s
	router, err := zctx.NewSocket(zmq.ROUTER)
	if err != nil {
		return fmt.Errorf("ventilator socket: %w", err)
	}
	v.router = router
	for _, set := range []func() error{
		func() error { return router.SetRouterMandatory(1) },
		func() error { return router.SetRouterHandover(true) },
		func() error { return router.SetLinger(0) },
		func() error { return router.SetSndtimeo(time.Second) },
		// A request is two short frames. libzmq caps each frame, not how many a message has:
		// recvFrom keeps the first two (requestLimits) and drops the rest as it receives them.
		func() error { return router.SetMaxmsgsize(64 << 10) },
		func() error { return router.SetBacklog(listenBacklog) },
		func() error { return setKeepalive(router, s.cfg.TCPKeepaliveIdle) },
		func() error { return setHeartbeat(router, s.cfg.HeartbeatInterval, s.cfg.HeartbeatTimeout) },
	} {
		if err := set(); err != nil {
			router.Close()
			return fmt.Errorf("ventilator socket options: %w", err)
		}
	}
	v.wake, err = zctx.NewSocket(zmq.PULL)
	if err != nil {
		router.Close()
		return fmt.Errorf("ventilator wake socket: %w", err)
	}
	v.wakeEP = fmt.Sprintf("inproc://cortexq-vent-wake-%p", v)
	if err := v.wake.Bind(v.wakeEP); err != nil {
		router.Close()
		v.wake.Close()
		return fmt.Errorf("ventilator wake socket: %w", err)
	}
	return nil
}

func (v *ventilator) close() {
	v.router.Close()
	v.wake.Close()
}

// runLeaser runs a leaser (stock.go) with a socket that pokes the ventilator's loop.
func (v *ventilator) runLeaser(ctx context.Context, zctx *zmq.Context) error {
	return v.withPoke(zctx, func(poke func()) { v.leaser(ctx, poke) })
}

// withPoke runs loop with a function that wakes the ventilator's loop, through a PUSH socket
// of the calling goroutine's own (a socket belongs to one goroutine). A poke never blocks: one
// the loop has not taken yet is enough.
func (v *ventilator) withPoke(zctx *zmq.Context, loop func(poke func())) error {
	poke, err := zctx.NewSocket(zmq.PUSH)
	if err != nil {
		return fmt.Errorf("ventilator poke socket: %w", err)
	}
	defer poke.Close()
	_ = poke.SetLinger(0)
	if err := poke.Connect(v.wakeEP); err != nil {
		return fmt.Errorf("ventilator poke socket: %w", err)
	}
	loop(func() { _, _ = poke.Send("", zmq.DONTWAIT) })
	return nil
}

// run is the ventilator's loop. It returns when ctx is done, its stock is given back and no
// job is under way.
func (v *ventilator) run(ctx context.Context) error {
	defer close(v.jobs)
	poller := zmq.NewPoller()
	poller.Add(v.router, zmq.POLLIN)
	poller.Add(v.wake, zmq.POLLIN)
	for {
		stopping := ctx.Err() != nil
		if stopping && v.leasing.Load() == 0 && v.s.stocks.len() == 0 && len(v.pendingRelease) == 0 {
			v.refusePending("stopping")
			return nil
		}
		if _, err := poller.Poll(pollInterval); err != nil && !isAgain(err) {
			if isClosed(err) {
				return nil
			}
			return fmt.Errorf("ventilator poll: %w", err)
		}
		for {
			if _, err := v.wake.RecvBytes(zmq.DONTWAIT); err != nil {
				break
			}
		}
		for range 4096 {
			msg, err := v.s.recvFrom(v.router, zmq.DONTWAIT, "ventilator", requestLimits)
			if err != nil {
				if !isAgain(err) && !isClosed(err) {
					v.s.logger.Warn("ventilator receive failed", "error", err)
				}
				break
			}
			if msg.err != nil {
				v.discardMalformed(msg.frames, msg.err)
				continue
			}
			v.handle(ctx, msg.frames, msg.from, stopping)
		}
	finish:
		for {
			select {
			case d := <-v.done:
				v.finish(d)
			default:
				break finish
			}
		}
		now := time.Now()
		if stopping || v.stopLeasing.Load() {
			v.refusePending("stopping") // requests that came before StopLeasing lease nothing after it
			v.releaseStock()
			continue
		}
		v.decideCapped()
		v.serve(ctx, now)
		if v.s.health.down.Load() {
			// No reservation can be made: what the stock cannot serve gets no work at once, and
			// no reservation is tried until the database is back (dblink.go).
			v.refusePending("db_unreachable")
		}
		v.answerOverdue(now)
		v.plan(now)
		v.publishSizes()
	}
}

// publishSizes publishes the sizes of the per-identity tables for the metrics.
func (v *ventilator) publishSizes() {
	t := &v.tracked
	t.waiting.Store(int64(len(v.waiting)))
	t.asking.Store(int64(len(v.asking)))
	t.askingKey.Store(int64(len(v.askingKey)))
	t.capped.Store(int64(len(v.capped)))
}

// refusePending answers every request not yet handed to a leaser with no work, for reason.
func (v *ventilator) refusePending(reason string) {
	for _, id := range v.order {
		for _, r := range v.pending[id].reqs {
			v.mock(r.identity, reason)
			delete(v.waiting, string(r.identity))
			v.unask(r)
		}
		delete(v.pending, id)
	}
	v.order = v.order[:0]
	for _, c := range v.capped {
		v.mock(c.req.identity, reason)
		delete(v.waiting, string(c.req.identity))
	}
	v.capped = v.capped[:0]
}

// answerOverdue answers no work to the pending requests that have waited requestWait (the
// database is slow or away).
func (v *ventilator) answerOverdue(now time.Time) {
	cutoff := now.Add(-requestWait)
	for i := 0; i < len(v.order); {
		id := v.order[i]
		p := v.pending[id]
		n := 0
		for ; n < len(p.reqs) && p.reqs[n].at.Before(cutoff); n++ {
			v.mock(p.reqs[n].identity, "lease_slow")
			delete(v.waiting, string(p.reqs[n].identity))
			v.unask(p.reqs[n])
		}
		clear(p.reqs[:n])
		p.reqs = p.reqs[n:]
		if len(p.reqs) > 0 {
			i++
			continue
		}
		delete(v.pending, id)
		v.order = slices.Delete(v.order, i, i+1)
	}
}

// serviceLookupWait bounds a service lookup of the ventilator's loop, which answers everyone.
const serviceLookupWait = time.Second

// lookupService is core.service for the ventilator's loop, which must not wait on the
// database: a lookup takes at most serviceLookupWait, and for a second after one failed, names
// not cached are answered with its error, not looked up again.
func (v *ventilator) lookupService(ctx context.Context, from peer, name string) (catalog.Service, error) {
	if svc, ok := v.s.catalog.CachedService(name); ok {
		return svc, nil
	}
	if time.Since(v.lookupFailed) < time.Second {
		return catalog.Service{}, v.lookupErr
	}
	lctx, cancel := context.WithTimeout(withPeer(ctx, from), serviceLookupWait)
	defer cancel()
	svc, err := v.s.service(lctx, name)
	if err != nil && !errors.Is(err, queue.ErrNotFound) && !errors.Is(err, errBogusBudget) {
		v.lookupFailed, v.lookupErr = time.Now(), err
	}
	return svc, err
}

// discardMalformed counts and logs a malformed request, and answers it no work.
func (v *ventilator) discardMalformed(msg [][]byte, err error) {
	v.s.metrics.discards.WithLabelValues("ventilator", wire.ReasonOf(err)).Inc()
	if n, emit := v.discard.Record(); emit {
		v.s.logger.Warn("malformed requests discarded", "count", n, "last_error", err)
	}
	if len(msg) > 0 && len(msg[0]) > 0 {
		v.mock(msg[0], "malformed") // a worker never waits out its timeout for our silence
	}
}

// handle takes one request off the socket.
func (v *ventilator) handle(ctx context.Context, msg [][]byte, from peer, stopping bool) {
	identity, service, err := wire.ParseRequest(msg)
	if err != nil {
		v.discardMalformed(msg, err)
		return
	}
	if stopping || v.stopLeasing.Load() {
		v.mock(identity, "stopping")
		return
	}
	svc, err := v.lookupService(ctx, from, service)
	if err != nil {
		reason := "unknown_service"
		switch {
		case errors.Is(err, errBogusBudget):
			reason = "unknown_service_rate_limited"
		case !errors.Is(err, queue.ErrNotFound):
			reason = "db_error"
		}
		v.s.metrics.discards.WithLabelValues("ventilator", reason).Inc()
		if n, emit := v.discard.Record(); emit {
			v.s.logger.Warn("requests for unknown services", "count", n, "service", service, "error", err)
		}
		v.mock(identity, reason)
		return
	}
	if v.waiting[string(identity)] {
		return // this worker already waits for a reply; it gets one
	}
	r := &request{identity: identity, worker: from.worker(wire.WorkerName(identity)), key: from.key, at: time.Now()}
	v.s.store.NoteRequest(svc.ID, r.worker) // alive, whether or not work comes (docs/web.md#liveness)
	if !v.atCap(r) {
		v.admit(svc, r)
		return
	}
	if len(v.capped) >= v.s.cfg.MaxInFlight {
		v.refuseCapped(r)
		return
	}
	v.capped = append(v.capped, cappedRequest{service: svc, req: r, until: time.Now().Add(capHold)})
	v.waiting[string(identity)] = true
}

// refuseCapped answers a request of a worker at its cap with no work.
func (v *ventilator) refuseCapped(r *request) {
	v.mock(r.identity, "worker_cap")
	if n, emit := v.capLog.Record(); emit {
		v.s.logger.Warn("requests of workers at their cap of unanswered leases get no work", "count", n,
			"worker", r.worker, "max_in_flight_per_worker", v.s.cfg.MaxInFlightPerWorker,
			"max_in_flight_per_key", v.s.cfg.MaxInFlightPerKey)
	}
}

// admit queues a request for a lease, unless the replica is saturated.
func (v *ventilator) admit(svc catalog.Service, r *request) {
	if queue.Saturated(v.s.hot.Len()+v.queued, v.s.cfg.MaxInFlight) {
		v.mock(r.identity, "backpressure")
		return
	}
	p := v.pending[svc.ID]
	if p == nil {
		p = &pendingService{service: svc}
		v.pending[svc.ID] = p
		v.order = append(v.order, svc.ID)
	}
	p.reqs = append(p.reqs, r)
	st := v.stockOf(svc)
	st.demand.add(r.at)
	st.asked++
	st.last = r.at
	v.waiting[string(r.identity)] = true
	v.queued++
	v.asking[r.worker]++
	if r.key != "" {
		v.askingKey[r.key]++
	}
}

// unask uncounts a request that is no longer pending or being leased.
func (v *ventilator) unask(r *request) {
	v.queued--
	decrement(v.asking, r.worker)
	if r.key != "" {
		decrement(v.askingKey, r.key)
	}
}

func decrement(counts map[string]int, name string) {
	if counts[name] <= 1 {
		delete(counts, name)
	} else {
		counts[name]--
	}
}

// atCap reports whether r's worker, or its key, holds as many unanswered leases of this
// replica (mirrored, or being leased) as it may.
func (v *ventilator) atCap(r *request) bool {
	cfg := v.s.cfg
	if v.s.hot.Held(r.worker)+v.asking[r.worker] >= cfg.MaxInFlightPerWorker {
		return true
	}
	return r.key != "" && cfg.MaxInFlightPerKey > 0 &&
		v.s.hot.HeldByKey(r.key)+v.askingKey[r.key] >= cfg.MaxInFlightPerKey
}

// decideCapped looks again at the requests held at their cap: it admits those under the cap
// now (their worker replied, or a claim or resync settled a lease), refuses those held for
// capHold once their resync is over, and has the others wait for another resync.
func (v *ventilator) decideCapped() {
	done := v.upkeep.resyncs.done.Load()
	now := time.Now()
	kept := v.capped[:0]
	for _, c := range v.capped {
		switch {
		case !v.atCap(c.req): // a reply or a claim came in meanwhile
			delete(v.waiting, string(c.req.identity))
			v.admit(c.service, c.req)
		case now.Sub(c.req.at) >= requestWait: // its resync is late: the database is slow
			delete(v.waiting, string(c.req.identity))
			v.refuseCapped(c.req)
		case done < c.after:
			kept = append(kept, c)
		case c.after > 0 && now.After(c.until):
			delete(v.waiting, string(c.req.identity))
			v.refuseCapped(c.req)
		case c.after == 0 && now.Sub(c.req.at) < capResyncAfter:
			kept = append(kept, c) // most caps end with the worker's reply, which is on its way
		default:
			c.after = v.upkeep.resyncSoon()
			kept = append(kept, c)
		}
	}
	clear(v.capped[len(kept):])
	v.capped = kept
}

// sendTask sends a leased task to its worker; reserved is when its reservation came back. It
// reports false when the worker was unroutable: nothing was sent and the lease must be returned.
//
// The source archive is read whole before the first frame goes out. A task message, once
// begun on the ROUTER, must be finished (the socket serves every worker), so a read that
// failed half way would reach the worker as a cut payload that looks whole, and its verdict
// would be recorded. Read first, an unreadable source gets a no-work reply and is left to
// the reaper, as a missing one is.
func (v *ventilator) sendTask(ctx context.Context, r *request, l lease.Lease, reserved time.Time) bool {
	identity := r.identity
	v.s.hot.Put(hot.Task{Task: l.Task, Worker: l.Worker, Key: r.key, Pending: true, HandedOut: time.Now(), Reserved: reserved})
	payload, readErr := v.readSource(ctx, l)
	defer v.releaseSource()
	// DONTWAIT: a peer that stopped reading (its queue full) must not stall every other worker.
	if _, err := v.router.SendBytes(identity, zmq.SNDMORE|zmq.DONTWAIT); err != nil {
		v.s.hot.Delete(l.TaskID)
		if n, emit := v.sendErr.Record(); emit {
			v.s.logger.Warn("worker unroutable; lease returned", "count", n, "worker", l.Worker, "error", err)
		}
		return false
	}
	if readErr != nil {
		// The worker gets no work; the task stays in flight, marked answered, for the reaper to
		// retry and finally dead-letter.
		_, _ = v.router.SendBytes([]byte(wire.MockTaskID), zmq.SNDMORE)
		_, _ = v.router.SendBytes(nil, 0)
		v.s.hot.Delete(l.TaskID)
		v.s.metrics.unreadable.Inc()
		v.s.metrics.mocks.WithLabelValues("unreadable_entry").Inc()
		v.s.logger.Error("source archive unreadable; task left to the reaper", "task_id", l.TaskID,
			"entry", l.Entry, "error", readErr)
		v.claims.noteUnusable(l)
		return true
	}
	v.s.metrics.leases.Inc()
	if _, err := v.router.SendBytes(wire.FormatTaskID(l.TaskID), zmq.SNDMORE); err != nil {
		v.s.logger.Warn("task send failed; the reaper recovers it", "task_id", l.TaskID, "error", err)
		return true
	}
	err := v.chunker.SendChunks(payload, func(frame []byte, more bool) error {
		flags := zmq.Flag(0)
		if more {
			flags = zmq.SNDMORE
		}
		_, err := v.router.SendBytes(frame, flags)
		return err
	})
	if err != nil {
		v.s.logger.Warn("payload send failed; the reaper recovers the task", "task_id", l.TaskID, "error", err)
	}
	if recordStages {
		v.s.hot.Sent(l.TaskID, time.Now()) // the end of its source stage (docs/stages.md)
	}
	return true
}

// sourceBufferKept is the largest source buffer the ventilator keeps for the next task; a
// larger one is let go once its task is sent.
const sourceBufferKept = 16 << 20

// readSource reads a lease's source archive whole into the ventilator's buffer, opened beneath
// its corpus's path (archive.ReadSource). The bytes are valid until releaseSource.
func (v *ventilator) readSource(ctx context.Context, l lease.Lease) ([]byte, error) {
	base, err := v.s.catalog.CorpusPath(ctx, l.CorpusID)
	if err != nil {
		return nil, err
	}
	buf, err := archive.ReadSource(base, l.Entry, v.src)
	if err != nil {
		return nil, err
	}
	v.src = buf
	return buf, nil
}

// releaseSource lets a large source buffer go.
func (v *ventilator) releaseSource() {
	if cap(v.src) > sourceBufferKept {
		v.src = nil
	}
}

// mock sends a no-work reply.
func (v *ventilator) mock(identity []byte, reason string) {
	v.s.metrics.mocks.WithLabelValues(reason).Inc()
	if _, err := v.router.SendBytes(identity, zmq.SNDMORE|zmq.DONTWAIT); err != nil {
		return // gone, or not reading: nothing to tell
	}
	_, _ = v.router.SendBytes([]byte(wire.MockTaskID), zmq.SNDMORE)
	_, _ = v.router.SendBytes(nil, 0)
}
