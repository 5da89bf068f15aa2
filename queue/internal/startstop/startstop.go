// Package startstop starts the parts of a process in order and stops them in reverse (Group):
// the replica's services (queue/replica) and, inside it, the worker-facing side's (queue/dispatch).
package startstop

import (
	"context"
	"errors"
	"sync"
)

// Service is one part of a replica. Start returns once the part runs, or with the error that
// kept it from starting; Stop returns once it has stopped, and does nothing for a part that
// never started. The model is River's startstop services (rivershared/startstop), reduced to
// what a replica needs: services started in order and stopped in reverse (Group).
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// Group starts its services in order and stops them in reverse: a part starts only after the
// parts it relies on, and stops before them.
type Group struct {
	services []Service
	started  int
}

// Start starts each service in turn with ctx's values but not its cancellation (a service stops
// through Stop). When one fails to start, those already started are stopped, in reverse.
func (g *Group) Start(ctx context.Context, services ...Service) error {
	g.services = services
	ctx = context.WithoutCancel(ctx)
	for _, s := range services {
		if err := s.Start(ctx); err != nil {
			g.Stop()
			return err
		}
		g.started++
	}
	return nil
}

// Stop stops the started services, the last started first.
func (g *Group) Stop() {
	for ; g.started > 0; g.started-- {
		g.services[g.started-1].Stop()
	}
}

// background is a Service running a function until Stop cancels its context.
type background struct {
	run    func(ctx context.Context)
	cancel context.CancelFunc
	done   chan struct{}
}

// Background returns a Service that runs run in a goroutine of its own: Stop cancels run's
// context and waits for it to return.
func Background(run func(ctx context.Context)) Service { return &background{run: run} }

func (b *background) Start(ctx context.Context) error {
	ctx, b.cancel = context.WithCancel(ctx)
	b.done = make(chan struct{})
	go func() {
		defer close(b.done)
		b.run(ctx)
	}()
	return nil
}

func (b *background) Stop() {
	if b.cancel == nil {
		return
	}
	b.cancel()
	<-b.done
}

// Funcs returns a Service of a start function that hands back the stop function.
func Funcs(start func(ctx context.Context) (stop func(), err error)) Service {
	return &funcs{start: start}
}

type funcs struct {
	start func(ctx context.Context) (stop func(), err error)
	stop  func()
	once  sync.Once
}

func (f *funcs) Start(ctx context.Context) error {
	stop, err := f.start(ctx)
	if err != nil {
		return err
	}
	if stop == nil {
		return errors.New("startstop: a service's start returned no stop")
	}
	f.stop = stop
	return nil
}

func (f *funcs) Stop() {
	if f.stop != nil {
		f.once.Do(f.stop)
	}
}
