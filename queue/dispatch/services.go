package dispatch

import (
	"context"
	"fmt"
	"sync"

	zmq "github.com/pebbe/zmq4"

	"github.com/cortexq/cortexq/queue/internal/startstop"
)

// The services of the worker-facing side that own no loop of their own: the ZeroMQ context,
// the endpoints' binding. Server.Run lists the group in its order.

// zmqContext is the ZeroMQ context of one run: made first, terminated last (Term waits for
// every socket of the context to be closed).
type zmqContext struct {
	*zmq.Context
	ioThreads int
}

// Start makes the context.
func (z *zmqContext) Start(context.Context) error {
	zctx, err := zmq.NewContext()
	if err != nil {
		return fmt.Errorf("zeromq context: %w", err)
	}
	if err := zctx.SetIoThreads(z.ioThreads); err != nil {
		_ = zctx.Term()
		return fmt.Errorf("zeromq context: %w", err)
	}
	z.Context = zctx
	return nil
}

// Stop terminates the context.
func (z *zmqContext) Stop() {
	if z.Context != nil {
		_ = z.Term()
		z.Context = nil
	}
}

// endpoints are the bound ventilator and sink endpoints, published once (Server.Endpoints).
type endpoints struct {
	mu    sync.Mutex
	eps   [2]string
	bound chan struct{}
}

func newEndpoints() *endpoints { return &endpoints{bound: make(chan struct{})} }

// wait returns the endpoints once they are bound.
func (e *endpoints) wait(ctx context.Context) (ventilator, sink string, err error) {
	select {
	case <-e.bound:
	case <-ctx.Done():
		return "", "", ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.eps[0], e.eps[1], nil
}

// service binds the ventilator's and the sink's sockets and publishes their endpoints, retrying
// a busy address until run ends. Its stop does nothing: the sockets' services close them.
func (e *endpoints) service(run context.Context, v *ventilator, k *sink) startstop.Service {
	return startstop.Funcs(func(context.Context) (func(), error) {
		ctx := run
		if err := bindRetry(ctx, v.router, v.s.cfg.VentilatorAddr, v.s.cfg.BindRetry); err != nil {
			return nil, fmt.Errorf("ventilator: %w", err)
		}
		if err := bindRetry(ctx, k.pull, k.cfg.SinkAddr, k.cfg.BindRetry); err != nil {
			return nil, fmt.Errorf("sink: %w", err)
		}
		e.mu.Lock()
		e.eps = [2]string{lastEndpoint(v.router), lastEndpoint(k.pull)}
		e.mu.Unlock()
		close(e.bound)
		k.logger.Info("serving workers", "ventilator", e.eps[0], "sink", e.eps[1],
			"max_in_flight", k.cfg.MaxInFlight)
		return func() {}, nil
	})
}

// loops is a service of goroutines that run until Stop cancels their context; one that fails
// ends the run (fail).
type loops struct {
	n      int
	run    func(ctx context.Context) error
	fail   context.CancelCauseFunc
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts the n goroutines.
func (l *loops) Start(ctx context.Context) error {
	ctx, l.cancel = context.WithCancel(ctx)
	for range l.n {
		l.wg.Go(func() {
			if err := l.run(ctx); err != nil {
				l.fail(err)
			}
		})
	}
	return nil
}

// Stop cancels the goroutines' context and waits for them.
func (l *loops) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	l.wg.Wait()
}
