package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/hot"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/wire"
)

// request is a worker waiting for a task.
type request struct {
	identity []byte
	worker   string
}

// leaseJob is one lease transaction's work: requests of one service.
type leaseJob struct {
	service lease.Service
	reqs    []request
}

type leaseDone struct {
	job    leaseJob
	leases []lease.Lease
	err    error
}

// requestLimits keeps a request's identity and service frames; any later ones are dropped.
var requestLimits = frameLimits{headers: 2}

// ventilator owns the ROUTER socket: it gathers requests, hands them in batches to the leasers
// and streams the leased payloads. Only its goroutine touches the socket.
type ventilator struct {
	s       *Server
	router  *zmq.Socket
	wake    *zmq.Socket
	wakeEP  string
	jobs    chan leaseJob
	done    chan leaseDone
	pending map[int32]*pendingService
	order   []int32 // services with pending requests, oldest first
	waiting map[string]bool
	queued  int // requests pending or being leased
	chunker *wire.Chunker
	src     []byte // the source archive being sent (readSource)
	discard *wire.RateLimiter
	sendErr *wire.RateLimiter
}

type pendingService struct {
	service lease.Service
	reqs    []request
}

func (s *Server) newVentilator(zctx *zmq.Context) (*ventilator, error) {
	router, err := zctx.NewSocket(zmq.ROUTER)
	if err != nil {
		return nil, fmt.Errorf("ventilator socket: %w", err)
	}
	v := &ventilator{
		s: s, router: router,
		jobs:    make(chan leaseJob, s.cfg.Leasers),
		done:    make(chan leaseDone, s.cfg.Leasers),
		pending: map[int32]*pendingService{},
		waiting: map[string]bool{},
		chunker: wire.NewChunker(s.cfg.MessageSize),
		discard: wire.NewRateLimiter(5 * time.Second),
		sendErr: wire.NewRateLimiter(5 * time.Second),
	}
	for _, set := range []func() error{
		func() error { return router.SetRouterMandatory(1) },
		func() error { return router.SetRouterHandover(true) },
		func() error { return router.SetLinger(0) },
		func() error { return router.SetSndtimeo(time.Second) },
		// A request is two short frames. libzmq caps each frame, not how many a message has:
		// recvFrom keeps the first two (requestLimits) and drops the rest as it receives them.
		func() error { return router.SetMaxmsgsize(64 << 10) },
		func() error { return setKeepalive(router, s.cfg.TCPKeepaliveIdle) },
	} {
		if err := set(); err != nil {
			router.Close()
			return nil, fmt.Errorf("ventilator socket options: %w", err)
		}
	}
	v.wake, err = zctx.NewSocket(zmq.PULL)
	if err != nil {
		router.Close()
		return nil, fmt.Errorf("ventilator wake socket: %w", err)
	}
	v.wakeEP = fmt.Sprintf("inproc://cortexq-vent-wake-%p", v)
	if err := v.wake.Bind(v.wakeEP); err != nil {
		router.Close()
		v.wake.Close()
		return nil, fmt.Errorf("ventilator wake socket: %w", err)
	}
	return v, nil
}

func (v *ventilator) close() {
	v.router.Close()
	v.wake.Close()
}

// leaser runs lease transactions for the ventilator and pokes it when one is done.
func (v *ventilator) leaser(ctx context.Context, zctx *zmq.Context) error {
	poke, err := zctx.NewSocket(zmq.PUSH)
	if err != nil {
		return fmt.Errorf("leaser socket: %w", err)
	}
	defer poke.Close()
	_ = poke.SetLinger(0)
	if err := poke.Connect(v.wakeEP); err != nil {
		return fmt.Errorf("leaser socket: %w", err)
	}
	// A transaction that has begun finishes even during a stop: its leases are then delivered.
	dbctx := context.WithoutCancel(ctx)
	for job := range v.jobs {
		workers := make([]string, len(job.reqs))
		for i, r := range job.reqs {
			workers[i] = r.worker
		}
		start := time.Now()
		tctx, cancel := context.WithTimeout(dbctx, 30*time.Second)
		leases, err := v.s.store.Lease(tctx, lease.LeaseRequest{
			ServiceID: job.service.ID, LeaseTimeout: job.service.LeaseTimeout, Workers: workers,
		})
		cancel()
		v.s.health.record(err)
		v.s.metrics.leaseSeconds.Observe(time.Since(start).Seconds())
		v.s.metrics.leaseBatch.Observe(float64(len(job.reqs)))
		v.done <- leaseDone{job: job, leases: leases, err: err}
		_, _ = poke.Send("", zmq.DONTWAIT)
	}
	return nil
}

// run is the ventilator's loop. It returns when ctx is done and no lease is under way.
func (v *ventilator) run(ctx context.Context) error {
	defer close(v.jobs)
	poller := zmq.NewPoller()
	poller.Add(v.router, zmq.POLLIN)
	poller.Add(v.wake, zmq.POLLIN)
	for {
		stopping := ctx.Err() != nil
		if stopping && v.s.leasing.Load() == 0 {
			v.refusePending()
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
			v.handle(ctx, msg.frames, msg.from, stopping)
		}
	deliver:
		for {
			select {
			case d := <-v.done:
				v.deliver(ctx, d)
				v.s.leasing.Add(-1)
			default:
				break deliver
			}
		}
		if v.s.stopLeasing.Load() {
			v.refusePending() // requests that came before StopLeasing lease nothing after it
		}
		for int(v.s.leasing.Load()) < v.s.cfg.Leasers && len(v.order) > 0 && !stopping {
			id := v.order[0]
			p := v.pending[id]
			n := min(len(p.reqs), v.s.cfg.LeaseBatch)
			job := leaseJob{service: p.service, reqs: p.reqs[:n:n]}
			p.reqs = p.reqs[n:]
			if len(p.reqs) == 0 {
				delete(v.pending, id)
				v.order = v.order[1:]
			}
			for _, r := range job.reqs {
				delete(v.waiting, string(r.identity))
			}
			v.s.leasing.Add(1)
			v.jobs <- job
		}
	}
}

// refusePending answers every request not yet handed to a leaser with no work.
func (v *ventilator) refusePending() {
	for _, id := range v.order {
		for _, r := range v.pending[id].reqs {
			v.mock(r.identity, "stopping")
			delete(v.waiting, string(r.identity))
			v.queued--
		}
		delete(v.pending, id)
	}
	v.order = v.order[:0]
}

// handle takes one request off the socket.
func (v *ventilator) handle(ctx context.Context, msg [][]byte, from peer, stopping bool) {
	identity, service, err := wire.ParseRequest(msg)
	if err != nil {
		v.s.metrics.discards.WithLabelValues("ventilator", wire.ReasonOf(err)).Inc()
		if n, emit := v.discard.Record(); emit {
			v.s.logger.Warn("malformed requests discarded", "count", n, "last_error", err)
		}
		if len(msg) > 0 && len(msg[0]) > 0 {
			v.mock(msg[0], "malformed") // a worker never waits out its timeout for our silence
		}
		return
	}
	if stopping || v.s.stopLeasing.Load() {
		v.mock(identity, "stopping")
		return
	}
	svc, err := v.s.service(withPeer(ctx, from), service)
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
	if queue.Saturated(v.s.hot.Len()+v.queued, v.s.cfg.MaxInFlight) {
		v.mock(identity, "backpressure")
		return
	}
	p := v.pending[svc.ID]
	if p == nil {
		p = &pendingService{service: svc}
		v.pending[svc.ID] = p
		v.order = append(v.order, svc.ID)
	}
	p.reqs = append(p.reqs, request{identity: identity, worker: from.worker(wire.WorkerName(identity))})
	v.waiting[string(identity)] = true
	v.queued++
}

// deliver sends the tasks of a finished lease transaction, and mock replies to the requests it
// found no task for.
func (v *ventilator) deliver(ctx context.Context, d leaseDone) {
	v.queued -= len(d.job.reqs)
	if d.err != nil {
		v.s.logger.Error("lease failed; requests get no work", "service", d.job.service.Name,
			"requests", len(d.job.reqs), "error", d.err)
		for _, r := range d.job.reqs {
			v.mock(r.identity, "db_error")
		}
		return
	}
	byWorker := map[string][]request{}
	for _, r := range d.job.reqs {
		byWorker[r.worker] = append(byWorker[r.worker], r)
	}
	var returns []lease.Lease
	for _, l := range d.leases {
		reqs := byWorker[l.Worker]
		if len(reqs) == 0 { // cannot happen: a lease is for a requesting worker
			returns = append(returns, l)
			continue
		}
		byWorker[l.Worker] = reqs[1:]
		if !v.sendTask(ctx, reqs[0].identity, l) {
			returns = append(returns, l)
		}
	}
	for _, reqs := range byWorker {
		for _, r := range reqs {
			v.mock(r.identity, "no_work")
		}
	}
	if len(returns) > 0 {
		v.s.returnLeases(ctx, returns)
	}
}

// sendTask sends a leased task to its worker. It reports false when the worker was
// unroutable: nothing was sent and the lease must be returned.
//
// The source archive is read whole before the first frame goes out. A task message, once
// begun on the ROUTER, must be finished (the socket serves every worker), so a read that
// failed half way would reach the worker as a cut payload that looks whole, and its verdict
// would be recorded. Read first, an unreadable source gets a no-work reply and is left to
// the reaper, as a missing one is.
func (v *ventilator) sendTask(ctx context.Context, identity []byte, l lease.Lease) bool {
	v.s.hot.Put(hot.Task{ID: l.TaskID, Run: l.Run, ServiceID: l.ServiceID, CorpusID: l.CorpusID, Entry: l.Entry, Worker: l.Worker})
	payload, readErr := v.readSource(l.Entry)
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
		v.s.noteUnusable(l)
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
	return true
}

// sourceBufferKept is the largest source buffer the ventilator keeps for the next task; a
// larger one is let go once its task is sent.
const sourceBufferKept = 16 << 20

// readSource reads a source archive whole into the ventilator's buffer. The bytes are valid
// until releaseSource.
func (v *ventilator) readSource(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, st.Mode().Type())
	}
	want := int(st.Size()) + 1 // one more, to see the end without growing
	if cap(v.src) < want {
		v.src = make([]byte, 0, want)
	}
	buf := v.src[:0]
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			v.src = buf
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if len(buf) == cap(buf) { // the file grew while we read it
			buf = append(buf, 0)[:len(buf)]
		}
	}
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
