package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/cortexq/cortexq/queue/wire"
)

// pollInterval is the longest a socket call blocks, so cancellation is noticed promptly even
// though IOTimeout is long.
const pollInterval = 100 * time.Millisecond

// pushLingerOnCancel bounds how long closing a sink socket waits for queued results when Run
// is cancelled; after Count is reached it waits up to IOTimeout.
const pushLingerOnCancel = time.Second

// Keepalive on worker sockets, as on the dispatcher's side: idle connections through NATs and
// firewalls stay up, dead peers are noticed.
const (
	keepaliveIdleSeconds     = 120
	keepaliveIntervalSeconds = 30
	keepaliveProbes          = 4
)

// stopReplyWait is how long a stopping worker still waits for the reply to a request it has
// sent. A dispatcher answers a request at once, with a task or with no work (a cortexq replica
// within its requestWait of 3 s even when its database is slow), so a reply is all but always in
// by then; one that is not is from a replica that is gone (killed while the request was on its
// way, or since) and will never come. The request is then given up: a cortexq replica that
// answers later finds the worker gone and returns the lease, no attempt spent.
const stopReplyWait = time.Second

var (
	errIOTimeout = errors.New("i/o timeout")
	// errReplicaGone: the replica that took a request disconnected before it answered.
	errReplicaGone = errors.New("the replica disconnected before it answered")
	// errStopping ends a request, or the wait for its reply, that a stopping worker gave up.
	errStopping = errors.New("worker stopping")
)

// loop is one task loop; its sockets are used by its goroutine only.
type loop struct {
	cfg      Config
	h        Handler
	identity string
	zctx     *zmq.Context
	budget   *budget
	chunker  *wire.Chunker
	log      *slog.Logger
	badReply *wire.RateLimiter

	// pairs are the dispatcher endpoints the loop talks to, p the one of the current task.
	pairs []*endpoints
	p     *endpoints
	next  int // the pair the next request goes to first
}

// backoffDoublings bounds how often the pause after failed exchanges in a row doubles: at most
// 2 × Backoff (4 s by default), so a worker is back at work within that of a heal.
const backoffDoublings = 1

// Heartbeats of the worker's connections: a ZMTP PING every heartbeatInterval on an otherwise
// quiet connection, which is closed (and connected again by libzmq) when nothing comes back for
// heartbeatTimeout, so a link gone silent is found even while the loop converts a task.
const (
	heartbeatInterval = 10 * time.Second
	heartbeatTimeout  = 30 * time.Second
)

func newLoop(cfg Config, h Handler, identity string, zctx *zmq.Context, b *budget) *loop {
	l := &loop{
		cfg:      cfg,
		h:        h,
		identity: identity,
		zctx:     zctx,
		budget:   b,
		chunker:  wire.NewChunker(cfg.MessageSize),
		log:      cfg.Logger.With("component", "worker", "worker", identity),
		badReply: wire.NewRateLimiter(wire.DefaultLogInterval),
		pairs:    pairEndpoints(cfg.Ventilator, cfg.Sink, !cfg.AnySink),
	}
	l.p = l.pairs[0]
	return l
}

// endpoints are a ventilator and a sink endpoint (each possibly a comma-separated list) with
// their sockets.
type endpoints struct {
	vent, sink string
	dealer     *zmq.Socket // nil when it must be rebuilt
	push       *zmq.Socket // nil when it must be rebuilt
	// gone receives the dealer's disconnections (a socket monitor), when the dealer talks to one
	// replica: a request that replica took is lost when it goes (killed, or its link dead).
	gone *zmq.Socket
	// failures counts the exchanges with this ventilator failed in a row: the pause after each
	// doubles from Backoff (backoffDoublings), and the first one that works again says so.
	failures int
	// restUntil is the end of that pause where the worker has other replicas to ask: requests go
	// to them meanwhile (pick), and the worker pauses only when every replica rests.
	restUntil time.Time
}

// pairEndpoints splits the configured endpoints into the pairs a loop uses. When the
// ventilator and sink lists name as many endpoints as each other, more than one, the i-th
// ventilator and the i-th sink are taken as one replica's: a task's result goes to the sink of
// the replica that handed it out, which finds the task in its memory, rather than to whichever
// sink libzmq's round robin picks (docs/semantics.md#claim: any replica accepts a result, at the cost of a
// database lookup and of the handing replica learning of it only later). Otherwise one pair
// holds both lists, and libzmq round-robins each socket's messages over its endpoints.
func pairEndpoints(vent, sink string, pair bool) []*endpoints {
	vs, ss := splitEndpoints(vent), splitEndpoints(sink)
	if pair && len(vs) > 1 && len(vs) == len(ss) {
		pairs := make([]*endpoints, len(vs))
		for i := range vs {
			pairs[i] = &endpoints{vent: vs[i], sink: ss[i]}
		}
		return pairs
	}
	return []*endpoints{{vent: vent, sink: sink}}
}

func splitEndpoints(list string) []string {
	var out []string
	for _, ep := range strings.Split(list, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			out = append(out, ep)
		}
	}
	return out
}

// run works tasks until ctx is done or the budget is spent, then closes the sockets.
func (l *loop) run(ctx context.Context) {
	if l.cfg.Sandbox != "" {
		l.log.Info("worker started", "service", l.cfg.Service, "ventilator", l.cfg.Ventilator, "sink", l.cfg.Sink, "sandbox", l.cfg.Sandbox)
	} else {
		l.log.Info("worker started", "service", l.cfg.Service, "ventilator", l.cfg.Ventilator, "sink", l.cfg.Sink)
	}
	defer func() {
		linger := l.cfg.IOTimeout
		if ctx.Err() != nil {
			linger = min(linger, pushLingerOnCancel)
		}
		l.close(linger)
		l.log.Info("worker stopped")
	}()
	for ctx.Err() == nil && !l.stopping() {
		if !l.budget.take() {
			return
		}
		if !l.once(ctx) {
			l.budget.refund()
		}
	}
}

// once requests one task and works it. It reports whether a real task arrived (and so used up
// its budget reservation).
func (l *loop) once(ctx context.Context) bool {
	if err := l.ensureSockets(); err != nil {
		l.log.Warn("socket setup failed", "err", err)
		l.pause(ctx, l.cfg.Backoff)
		return false
	}
	if err := l.request(ctx); err != nil {
		l.transportError(ctx, "request", err)
		return false
	}
	l.cfg.Stats.Requests.Add(1)
	first, more, err := l.receive(ctx, stopReplyWait)
	if errors.Is(err, errReplicaGone) {
		// Its request went with it: asked again at once, of the next replica in turn.
		l.cfg.Stats.Lost.Add(1)
		l.log.Info("the replica went away with this request; asking again", "ventilator", l.p.vent)
		l.closeDealer(l.p)
		return false
	}
	if err != nil {
		l.transportError(ctx, "reply", err)
		return false
	}
	l.exchanged()

	if wire.IsMock(first) {
		if err := l.drain(ctx, more); err != nil {
			l.transportError(ctx, "mock reply", err)
			return false
		}
		l.cfg.Stats.Mocks.Add(1)
		l.log.Debug("no work", "throttle", l.cfg.Throttle)
		l.pause(ctx, l.cfg.Throttle)
		return false
	}
	taskID, err := wire.ParseTaskID(first)
	if err != nil {
		if err := l.drain(ctx, more); err != nil {
			l.transportError(ctx, "bad reply", err)
			return false
		}
		l.cfg.Stats.BadReplies.Add(1)
		if n, emit := l.badReply.Record(); emit {
			l.log.Warn("ventilator reply discarded", "err", err, "count", n)
		}
		l.pause(ctx, l.cfg.Backoff)
		return false
	}
	l.cfg.Stats.Tasks.Add(1)
	l.task(ctx, taskID, first, more)
	return true
}

// task stores the payload, converts it and pushes the result; a task that cannot be worked is
// answered with an empty result, so the dispatcher retries it without waiting for its lease.
func (l *loop) task(ctx context.Context, taskID int64, idFrame []byte, more bool) {
	log := l.log.With("task_id", taskID)
	start := time.Now()

	var spill [][]byte // a payload received in memory that turned out too large for it
	if mh, ok := l.h.(MemoryHandler); ok {
		frames, size, err := l.receiveFrames(ctx, more)
		if err != nil {
			l.payloadLost(ctx, log, idFrame, err)
			return
		}
		more = len(frames) > 0 && frames[len(frames)-1] == nil
		if !more {
			l.convertInMemory(ctx, log, mh, idFrame, frames, size, start)
			return
		}
		spill = frames[:len(frames)-1]
	}

	dir, err := os.MkdirTemp(l.cfg.TempDir, "cortex_task*")
	if err != nil {
		if derr := l.drain(ctx, more); derr != nil {
			l.transportError(ctx, "task payload", derr)
			return
		}
		log.Warn("task not worked: scratch directory", "err", err)
		l.cfg.Stats.Failed.Add(1)
		l.pushEmpty(ctx, log, idFrame)
		l.pause(ctx, l.cfg.Backoff)
		return
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("remove scratch directory", "dir", dir, "err", err)
		}
	}()

	name := string(idFrame)
	in := filepath.Join(dir, name+".zip")
	out := filepath.Join(dir, name+".result.zip")
	size, storeErr, err := l.receivePayload(ctx, in, spill, more)
	if err != nil {
		l.payloadLost(ctx, log, idFrame, err)
		return
	}
	if storeErr != nil {
		log.Warn("task not worked: store payload", "err", storeErr)
		l.cfg.Stats.Failed.Add(1)
		l.pushEmpty(ctx, log, idFrame)
		return
	}

	err = l.h.Convert(ctx, in, out)
	var result *os.File
	if err == nil {
		result, err = os.Open(out)
		if err != nil {
			err = fmt.Errorf("open result: %w", err)
		}
	}
	if result != nil {
		defer result.Close()
	}
	l.answer(ctx, log, idFrame, result, err, size, start)
}

// payloadLost answers a task whose payload broke off with an empty result; the rest of the
// payload is lost with the DEALER, which is rebuilt.
func (l *loop) payloadLost(ctx context.Context, log *slog.Logger, idFrame []byte, err error) {
	if ctx.Err() == nil {
		l.cfg.Stats.Failed.Add(1)
		l.pushEmpty(ctx, log, idFrame)
	}
	l.transportError(ctx, "task payload", err)
}

// answer pushes a converted task's result, or an empty result when the conversion failed (unless
// the worker is stopping, when the task is left to the dispatcher's reaper).
func (l *loop) answer(ctx context.Context, log *slog.Logger, idFrame []byte, result io.Reader, err error, size int64, start time.Time) {
	if err != nil {
		if ctx.Err() != nil {
			log.Info("task abandoned: worker stopping", "err", err)
			return
		}
		log.Warn("convert failed; sending an empty result", "err", err)
		l.cfg.Stats.Failed.Add(1)
		l.pushEmpty(ctx, log, idFrame)
		return
	}
	if err := l.pushResult(ctx, idFrame, result); err != nil {
		if errors.Is(err, wire.ErrPayloadRead) && ctx.Err() == nil {
			// Nothing of the cut result went out (the half message left with its socket):
			// answer with an empty result, which the dispatcher retries at once.
			log.Error("result unreadable; sending an empty result", "err", err)
			l.cfg.Stats.Failed.Add(1)
			l.pushEmpty(ctx, log, idFrame)
			return
		}
		log.Error("push result", "err", err)
		return
	}
	log.Debug("task done", "input_bytes", size, "duration", time.Since(start))
}

// receivePayload streams the remaining frames of a task reply to path. A transport error is
// returned as err (the socket is then unusable); a file error is returned as storeErr once all
// frames are drained, so the socket stays in step.
func (l *loop) receivePayload(ctx context.Context, path string, head [][]byte, more bool) (size int64, storeErr, err error) {
	f, storeErr := os.Create(path)
	for _, frame := range head {
		size += int64(len(frame))
		if storeErr == nil {
			_, storeErr = f.Write(frame)
		}
	}
	for more {
		var frame []byte
		frame, more, err = l.recv(ctx)
		if err != nil {
			break
		}
		size += int64(len(frame))
		if storeErr == nil {
			_, storeErr = f.Write(frame)
		}
	}
	if f != nil {
		if cerr := f.Close(); storeErr == nil {
			storeErr = cerr
		}
	}
	return size, storeErr, err
}

// receiveFrames receives the remaining frames of a task reply into memory, up to
// MemoryPayloadMax bytes. When the payload is larger it stops there and returns the frames so
// far followed by a nil frame: the rest is still on the socket.
func (l *loop) receiveFrames(ctx context.Context, more bool) (frames [][]byte, size int, err error) {
	for more {
		if size > l.cfg.MemoryPayloadMax {
			return append(frames, nil), size, nil
		}
		var frame []byte
		if frame, more, err = l.recv(ctx); err != nil {
			return nil, 0, err
		}
		size += len(frame)
		frames = append(frames, frame)
	}
	return frames, size, nil
}

// convertInMemory works a payload held in memory and pushes its result.
func (l *loop) convertInMemory(ctx context.Context, log *slog.Logger, mh MemoryHandler, idFrame []byte, frames [][]byte, size int, start time.Time) {
	var payload []byte
	switch len(frames) {
	case 0:
	case 1:
		payload = frames[0]
	default:
		payload = make([]byte, 0, size)
		for _, f := range frames {
			payload = append(payload, f...)
		}
	}
	out, err := mh.ConvertBytes(ctx, payload)
	l.answer(ctx, log, idFrame, bytes.NewReader(out), err, int64(size), start)
}

// pushResult sends [identity, service, taskid, chunk…] to the sink: that of the replica that
// handed the task out, or another's when that one has no replica connected (startSink).
func (l *loop) pushResult(ctx context.Context, idFrame []byte, r io.Reader) error {
	p, err := l.startSink(ctx)
	if err == nil {
		err = l.sendRest(ctx, p.push, idFrame, r)
	}
	if err != nil {
		// The socket may hold half a message: drop it with its queue (libzmq discards an
		// unfinished message) and start afresh.
		l.closeSocket(&p.push, 0)
		return err
	}
	l.cfg.Stats.Pushed.Add(1)
	return nil
}

// startSink sends a result's first frame and returns the pair whose sink took it. The sockets
// queue only to connected replicas, so a sink that does not take it at once has no replica
// connected (killed and starting again, say). Any replica accepts any result
// (docs/semantics.md#claim), so while the task's own sink does not take it, every other sink
// is offered it too on each turn of the wait, and the first that takes it gets it: a sink
// socket built a moment ago takes it as soon as its connection is up, and the worker does not
// wait for its own replica to come back.
func (l *loop) startSink(ctx context.Context) (*endpoints, error) {
	first := []byte(l.identity)
	if l.p.push == nil {
		if err := l.buildPush(l.p); err != nil && len(l.pairs) == 1 {
			return l.p, err
		}
	}
	if len(l.pairs) == 1 {
		return l.p, l.send(ctx, l.p.push, first, zmq.SNDMORE, noStop)
	}
	at := slices.Index(l.pairs, l.p)
	w := l.newWait("send", noStop)
	for {
		for i := range l.pairs {
			p := l.pairs[(at+i)%len(l.pairs)]
			if p.push == nil && l.buildPush(p) != nil {
				continue
			}
			flags := zmq.SNDMORE | zmq.DONTWAIT
			if i == 0 {
				flags = zmq.SNDMORE // the own sink: wait up to one poll interval
			}
			_, err := p.push.SendBytes(first, flags)
			if err == nil {
				if p != l.p {
					l.cfg.Stats.Redirected.Add(1)
					l.log.Debug("result sent to another replica's sink: its own has no replica connected", "sink", p.sink, "own", l.p.sink)
				}
				return p, nil
			}
			if zmq.AsErrno(err) != zmq.Errno(syscall.EAGAIN) {
				l.closeSocket(&p.push, 0)
			}
		}
		if err := w.over(ctx); err != nil {
			return l.p, err
		}
		if l.p.push == nil { // no socket waited this turn: pause as a wait would
			select {
			case <-ctx.Done():
			case <-time.After(pollInterval):
			}
		}
	}
}

// sendRest sends a result's frames after the first: the service, the task id and the chunks.
func (l *loop) sendRest(ctx context.Context, push *zmq.Socket, idFrame []byte, r io.Reader) error {
	for _, f := range [][]byte{[]byte(l.cfg.Service), idFrame} {
		if err := l.send(ctx, push, f, zmq.SNDMORE, noStop); err != nil {
			return err
		}
	}
	return l.chunker.WriteChunks(r, func(frame []byte, more bool) error {
		flags := zmq.Flag(0)
		if more {
			flags = zmq.SNDMORE
		}
		return l.send(ctx, push, frame, flags, noStop)
	})
}

// pushEmpty answers a task with an empty result, which the dispatcher treats as unusable.
func (l *loop) pushEmpty(ctx context.Context, log *slog.Logger, idFrame []byte) {
	if err := l.pushResult(ctx, idFrame, eofReader{}); err != nil {
		log.Error("push empty result", "err", err)
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// transportError logs a failed exchange with the ventilator, rebuilds the DEALER (dropping any
// late reply) and backs off. A request the stopping worker gave up (errStopping) is only
// logged: the loop ends.
func (l *loop) transportError(ctx context.Context, what string, err error) {
	l.closeDealer(l.p)
	if ctx.Err() != nil {
		return
	}
	if errors.Is(err, errStopping) {
		l.log.Info("request given up: worker stopping", "stage", what, "ventilator", l.p.vent)
		return
	}
	l.cfg.Stats.Rebuilds.Add(1)
	l.p.failures++
	backoff := l.cfg.Backoff << min(l.p.failures-1, backoffDoublings)
	if len(l.pairs) > 1 {
		// A replica stalled or unreachable costs this worker its timeout, not a pause too: the
		// others are asked meanwhile, and this one again once the pause is over.
		l.p.restUntil = time.Now().Add(backoff)
		l.log.Warn("ventilator exchange failed; asking the other replicas, this one again after a pause", "stage", what, "err", err,
			"ventilator", l.p.vent, "failures_in_a_row", l.p.failures, "backoff", backoff)
		return
	}
	l.log.Warn("ventilator exchange failed; reconnecting after a pause", "stage", what, "err", err,
		"ventilator", l.p.vent, "failures_in_a_row", l.p.failures, "backoff", backoff)
	l.pause(ctx, backoff)
}

// exchanged notes an exchange with the current ventilator that worked, after failures.
func (l *loop) exchanged() {
	if l.p.failures == 0 {
		return
	}
	l.log.Info("ventilator reachable again", "ventilator", l.p.vent, "failures_in_a_row", l.p.failures)
	l.p.failures = 0
}

// drain receives and discards the rest of a multipart message.
func (l *loop) drain(ctx context.Context, more bool) error {
	for more {
		var err error
		if _, more, err = l.recv(ctx); err != nil {
			return err
		}
	}
	return nil
}

// noStop is the stopAfter of a socket call that the worker's stop does not cut short: a
// result's frames, and the frames of a reply after its first, which come with it.
const noStop = time.Duration(-1)

// ioWait bounds one blocking socket call, made in pollInterval steps: IOTimeout, ctx, and, for a
// request or the wait for its reply, the worker's stop: stopAfter after the loop first sees
// Config.Stopping closed (noStop: never).
type ioWait struct {
	l         *loop
	what      string
	deadline  time.Time
	stopAfter time.Duration
	stopAt    time.Time
}

func (l *loop) newWait(what string, stopAfter time.Duration) *ioWait {
	return &ioWait{l: l, what: what, deadline: time.Now().Add(l.cfg.IOTimeout), stopAfter: stopAfter}
}

// over reports why the call must end now (ctx's error, errStopping or an I/O timeout), or nil.
func (w *ioWait) over(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	if w.stopAfter >= 0 && w.stopAt.IsZero() && w.l.stopping() {
		w.stopAt = now.Add(w.stopAfter)
	}
	if !w.stopAt.IsZero() && !now.Before(w.stopAt) {
		return fmt.Errorf("%s: %w", w.what, errStopping)
	}
	if now.After(w.deadline) {
		return fmt.Errorf("%s: %w after %s", w.what, errIOTimeout, w.l.cfg.IOTimeout)
	}
	return nil
}

// send sends one frame, waiting at most IOTimeout in pollInterval steps (and stopAfter past the
// worker's stop, unless noStop).
func (l *loop) send(ctx context.Context, s *zmq.Socket, frame []byte, flags zmq.Flag, stopAfter time.Duration) error {
	w := l.newWait("send", stopAfter)
	for {
		_, err := s.SendBytes(frame, flags)
		if err == nil {
			return nil
		}
		if zmq.AsErrno(err) != zmq.Errno(syscall.EAGAIN) {
			return err
		}
		if err := w.over(ctx); err != nil {
			return err
		}
	}
}

// recv receives one frame from the DEALER, waiting at most IOTimeout in pollInterval steps.
func (l *loop) recv(ctx context.Context) (frame []byte, more bool, err error) {
	return l.receive(ctx, noStop)
}

// receive is recv that, unless stopAfter is noStop, also gives up stopAfter past the worker's
// stop (errStopping): the wait for a reply's first frame.
func (l *loop) receive(ctx context.Context, stopAfter time.Duration) (frame []byte, more bool, err error) {
	w := l.newWait("receive", stopAfter)
	for {
		frame, err = l.p.dealer.RecvBytes(0)
		if err == nil {
			more, err = l.p.dealer.GetRcvmore()
			return frame, more, err
		}
		if zmq.AsErrno(err) != zmq.Errno(syscall.EAGAIN) {
			return nil, false, err
		}
		if stopAfter != noStop && l.p.disconnected() { // the wait for a reply: its replica went
			return nil, false, errReplicaGone
		}
		if err := w.over(ctx); err != nil {
			return nil, false, err
		}
	}
}

// request sends a request for a task. With several pairs of endpoints the requests take turns
// over them: it goes to the first pair from the next one in turn whose ventilator takes it at
// once (the sockets queue only to connected peers), else waits on the next one's. The pair it
// went to answers it and gets the task's result.
func (l *loop) request(ctx context.Context) error {
	service := []byte(l.cfg.Service)
	if len(l.pairs) > 1 {
		now := time.Now()
		for i := range l.pairs {
			p := l.pairs[(l.next+i)%len(l.pairs)]
			if now.Before(p.restUntil) {
				continue // after a failed exchange (transportError)
			}
			if err := l.ensurePair(p); err != nil {
				l.log.Debug("socket setup failed", "ventilator", p.vent, "err", err)
				continue
			}
			p.disconnected() // what went before this request
			if _, err := p.dealer.SendBytes(service, zmq.DONTWAIT); err == nil {
				l.p = p
				l.next = (l.next + i + 1) % len(l.pairs)
				return nil
			}
		}
	}
	l.p = l.pick(ctx)
	if err := l.ensurePair(l.p); err != nil {
		return err
	}
	l.p.disconnected() // what went before this request
	// Not sent yet (no replica connected): a stopping worker gives it up at once.
	return l.send(ctx, l.p.dealer, service, 0, 0)
}

// pick chooses the pair a request waits on when none took it at once: the next in turn that is
// not resting after a failed exchange; when every one rests, the first to be done, after
// pausing until then.
func (l *loop) pick(ctx context.Context) *endpoints {
	var first *endpoints
	for i := range l.pairs {
		p := l.pairs[(l.next+i)%len(l.pairs)]
		if first == nil || p.restUntil.Before(first.restUntil) {
			first = p
		}
		if !time.Now().Before(p.restUntil) {
			l.next = (l.next + i + 1) % len(l.pairs)
			return p
		}
	}
	l.pause(ctx, time.Until(first.restUntil))
	for i, p := range l.pairs {
		if p == first {
			l.next = (i + 1) % len(l.pairs)
		}
	}
	return first
}

// ensureSockets builds the sockets of every pair that lacks them.
func (l *loop) ensureSockets() error {
	for _, p := range l.pairs {
		if err := l.ensurePair(p); err != nil {
			return err
		}
	}
	return nil
}

func (l *loop) ensurePair(p *endpoints) error {
	if p.dealer == nil {
		if err := l.buildDealer(p); err != nil {
			return err
		}
	}
	if p.push == nil {
		return l.buildPush(p)
	}
	return nil
}

func (l *loop) buildDealer(p *endpoints) error {
	s, err := l.socket(zmq.DEALER, p.vent, func(s *zmq.Socket) error {
		return s.SetIdentity(l.identity)
	})
	if err != nil {
		return fmt.Errorf("ventilator socket: %w", err)
	}
	p.dealer = s
	if len(splitEndpoints(p.vent)) == 1 {
		if err := l.watchDealer(p); err != nil {
			l.closeDealer(p)
			return fmt.Errorf("ventilator socket monitor: %w", err)
		}
	}
	return nil
}

// monitors numbers the dealers' monitor endpoints, unique in the process.
var monitors atomic.Uint64

// watchDealer connects p.gone to a monitor of p.dealer's disconnections.
func (l *loop) watchDealer(p *endpoints) error {
	addr := fmt.Sprintf("inproc://cortexq-worker-dealer-%d", monitors.Add(1))
	if err := p.dealer.Monitor(addr, zmq.EVENT_DISCONNECTED); err != nil {
		return err
	}
	m, err := l.zctx.NewSocket(zmq.PAIR)
	if err != nil {
		return err
	}
	if err := m.SetLinger(0); err != nil {
		_ = m.Close()
		return err
	}
	if err := m.Connect(addr); err != nil {
		_ = m.Close()
		return err
	}
	p.gone = m
	return nil
}

// disconnected reports whether p's dealer lost its replica since the last call (false when it
// is not watched).
func (p *endpoints) disconnected() bool {
	if p.gone == nil {
		return false
	}
	lost := false
	for range 64 { // the events since the last call: a few at most
		ev, _, _, err := p.gone.RecvEvent(zmq.DONTWAIT)
		if err != nil {
			break
		}
		lost = lost || ev == zmq.EVENT_DISCONNECTED
	}
	return lost
}

// closeDealer closes p's dealer and its monitor.
func (l *loop) closeDealer(p *endpoints) {
	l.closeSocket(&p.dealer, 0)
	l.closeSocket(&p.gone, 0)
}

func (l *loop) buildPush(p *endpoints) error {
	s, err := l.socket(zmq.PUSH, p.sink, nil)
	if err != nil {
		return fmt.Errorf("sink socket: %w", err)
	}
	p.push = s
	return nil
}

// socket makes a socket of type t with short timeouts and keepalive, and connects it.
func (l *loop) socket(t zmq.Type, endpoint string, setup func(*zmq.Socket) error) (*zmq.Socket, error) {
	s, err := l.zctx.NewSocket(t)
	if err != nil {
		return nil, err
	}
	poll := max(min(pollInterval, l.cfg.IOTimeout), time.Millisecond) // 0 would not block at all
	for _, set := range []func() error{
		func() error { return s.SetLinger(0) },
		func() error { return s.SetRcvtimeo(poll) },
		func() error { return s.SetSndtimeo(poll) },
		func() error { return s.SetTcpKeepalive(1) },
		func() error { return s.SetTcpKeepaliveIdle(keepaliveIdleSeconds) },
		func() error { return s.SetTcpKeepaliveIntvl(keepaliveIntervalSeconds) },
		func() error { return s.SetTcpKeepaliveCnt(keepaliveProbes) },
		func() error { return s.SetHeartbeatIvl(heartbeatInterval) },
		func() error { return s.SetHeartbeatTimeout(heartbeatTimeout) },
		func() error { return s.SetHeartbeatTtl(heartbeatTimeout) },
		func() error {
			if setup == nil {
				return nil
			}
			return setup(s)
		},
		func() error { return l.cfg.Curve.apply(s) },
		// Queue only to connected dispatchers: a request never waits on a replica that is down.
		func() error { return s.SetImmediate(true) },
		func() error {
			// Several comma-separated endpoints: one connection each; libzmq round-robins.
			for _, ep := range splitEndpoints(endpoint) {
				if err := s.Connect(ep); err != nil {
					return err
				}
			}
			return nil
		},
	} {
		if err := set(); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// close closes both sockets; the sink socket keeps its queued results for up to pushLinger.
func (l *loop) close(pushLinger time.Duration) {
	for _, p := range l.pairs {
		l.closeDealer(p)
		l.closeSocket(&p.push, pushLinger)
	}
}

func (l *loop) closeSocket(s **zmq.Socket, linger time.Duration) {
	if *s == nil {
		return
	}
	if err := (*s).SetLinger(linger); err != nil {
		l.log.Debug("set linger", "err", err)
	}
	if err := (*s).Close(); err != nil {
		l.log.Debug("close socket", "err", err)
	}
	*s = nil
}

// stopping reports whether Config.Stopping is closed: the loop finishes the task in hand and
// requests no more.
func (l *loop) stopping() bool {
	select {
	case <-l.cfg.Stopping:
		return true
	default:
		return false
	}
}

// pause waits d, or until ctx is done or the worker is stopping: a pause between requests.
func (l *loop) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-l.cfg.Stopping:
	case <-t.C:
	}
}
