// Package replica assembles one dispatcher replica from services that start in order and stop
// in reverse (Group): the reaper's fallback, the River client that runs the reaper and the
// report fold when this replica is the elected leader, the metrics endpoint, the start-up sweep
// of the corpora and, last, the worker-facing side (ventilator and sink, queue/dispatch). A
// stop drains first: no new leases, then the results of those out, for at most DrainTimeout.
// `cortexq serve` and `cortexq demo` run a replica through this package, and `cortexq bench`
// runs `cortexq serve`.
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/dispatch"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reaper"
)

// Config configures a replica.
type Config struct {
	Lease    lease.Config
	Dispatch dispatch.Config
	Reaper   reaper.Config
	// Fallback reaps on this replica when no pass has been recorded for a few reap intervals
	// (reaper.Fallback): a killed leader holds River's election for a while.
	Fallback bool
	// HTTP, if set, serves metrics and health; it starts before the sweep and the workers.
	HTTP Service
	// Sweep, if set, runs in the background once at start: it is given the replica's server,
	// whose incarnation names this process's temp files.
	Sweep func(ctx context.Context, srv *dispatch.Server)
	// DrainTimeout bounds Drain in Run.
	DrainTimeout time.Duration
}

// Replica is one dispatcher replica: its lease store, worker-facing server and reaper.
type Replica struct {
	cfg     Config
	base    *base.Base
	store   *lease.Store
	server  *dispatch.Server
	river   *river.Client[pgx.Tx]
	workers *workers
	group   Group
}

// New builds a replica on b; nothing runs until Start.
func New(b *base.Base, cfg Config) (*Replica, error) {
	store := b.Lease(cfg.Lease)
	srv, err := dispatch.New(dispatch.Deps{Store: store, Catalog: b.Catalog, Keys: b.Allowlist, ConnConfig: b.Pool.Config().ConnConfig}, cfg.Dispatch)
	if err != nil {
		return nil, err
	}
	rv, err := reaper.New(b.Pool, store, b.Reports, cfg.Reaper)
	if err != nil {
		return nil, err
	}
	return &Replica{cfg: cfg, base: b, store: store, server: srv, river: rv, workers: &workers{srv: srv}}, nil
}

// LeaderID is the ID of the replica's River client: river_leader names it while this replica
// leads (runs the reaper and the report fold).
func (r *Replica) LeaderID() string { return r.river.ID() }

// Server is the replica's worker-facing side.
func (r *Replica) Server() *dispatch.Server { return r.server }

// Start starts the services in order; it returns once the worker sockets are bound.
func (r *Replica) Start(ctx context.Context) error {
	var services []Service
	if r.cfg.Fallback {
		services = append(services, Background(func(ctx context.Context) {
			reaper.Fallback(ctx, r.base.Inspect, r.store, r.cfg.Reaper.Interval, r.cfg.Reaper.Logger, r.cfg.Reaper.OnPass)
		}))
	}
	if r.cfg.HTTP != nil {
		services = append(services, r.cfg.HTTP)
	}
	if r.cfg.Sweep != nil {
		services = append(services, Background(func(ctx context.Context) { r.cfg.Sweep(ctx, r.server) }))
	}
	// The worker-facing side before River: a replica restarted after a crash serves without
	// waiting for River's start-up queries (a few round trips: docs/operations.md#one-process-a-name),
	// and nothing it does needs the reaper. Stopped in reverse, River stops first.
	return r.group.Start(ctx, append(services, r.workers, &riverService{client: r.river, logger: r.cfg.Dispatch.Logger})...)
}

// Failed is closed when the worker-facing side stopped on its own (Err says why).
func (r *Replica) Failed() <-chan struct{} { return r.workers.done }

// Err is the worker-facing side's error, once it stopped: nil after a stop asked for.
func (r *Replica) Err() error { return r.workers.err }

// Stop stops the services in reverse order, River first and then the worker-facing side, without
// draining.
func (r *Replica) Stop() { r.group.Stop() }

// Run starts the replica and serves until ctx is done, then drains (no new leases; the results
// of those out, for at most Config.DrainTimeout) and stops; or until the worker-facing side
// fails, such as on a database outage past its budget, and returns its error.
func (r *Replica) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		logger := r.cfg.Dispatch.Logger
		logger.Info("stopping: no new leases; draining results", "in_flight", r.server.InFlight(), "drain_timeout", r.cfg.DrainTimeout)
		start := time.Now()
		left := r.server.Drain(context.Background(), r.cfg.DrainTimeout)
		logger.Info("drained", "unanswered", left, "took", time.Since(start).Round(time.Millisecond))
	case <-r.workers.done:
	}
	r.Stop()
	return r.Err()
}

// riverService starts and stops the River client of the reaper and the fold.
type riverService struct {
	client *river.Client[pgx.Tx]
	logger *slog.Logger
	cancel context.CancelFunc
	// retrying is closed when the retries of a start that could not connect end (nil: none).
	retrying chan struct{}
}

// riverRetryInterval is how often a River client that could not connect at the start tries again.
const riverRetryInterval = time.Second

// Start starts the client. One that cannot reach the database (it went away after the
// replica's checks: a crash, a restart) is started again in the background each
// riverRetryInterval, the replica serving meanwhile (the outage watch bounds how long); any
// other error is the start's.
func (s *riverService) Start(ctx context.Context) error {
	if s.logger == nil {
		s.logger = slog.Default()
	}
	ctx, s.cancel = context.WithCancel(ctx)
	err := s.client.Start(ctx)
	if err == nil {
		return nil
	}
	var connect *pgconn.ConnectError
	if !errors.As(err, &connect) {
		s.cancel()
		return fmt.Errorf("start the reaper: %w", err)
	}
	s.logger.Warn("the reaper's River client cannot reach the database; serving without it, starting it again each second", "error", err)
	s.retrying = make(chan struct{})
	go func() {
		defer close(s.retrying)
		t := time.NewTicker(riverRetryInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.client.Start(ctx); err == nil {
				s.logger.Info("the reaper's River client started")
				return
			}
		}
	}()
	return nil
}

// riverStopTimeout bounds the stop of River's client, after which its context is cancelled.
const riverStopTimeout = 10 * time.Second

// Stop cancels the reap or fold running now rather than wait for it: each works in transactions
// of its own and the next period goes on where it stopped, while a paced fold of a large backlog
// could hold the stop for minutes (and past riverStopTimeout, River's completer met a closed pool).
func (s *riverService) Stop() {
	if s.cancel == nil {
		return
	}
	if s.retrying != nil {
		s.cancel()
		<-s.retrying
	}
	defer s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), riverStopTimeout)
	defer cancel()
	_ = s.client.StopAndCancel(ctx) // past the timeout, the cancel stops what is left
}

// workers runs the dispatch server (ventilator and sink) as a Service.
type workers struct {
	srv    *dispatch.Server
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (w *workers) Start(ctx context.Context) error {
	ctx, w.cancel = context.WithCancel(ctx)
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		w.err = w.srv.Run(ctx)
	}()
	bound, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.done: // failed before binding
			cancel()
		case <-bound.Done():
		}
	}()
	if _, _, err := w.srv.Endpoints(bound); err != nil {
		<-w.done
		w.cancel()
		if w.err == nil {
			w.err = err
		}
		return w.err
	}
	return nil
}

func (w *workers) Stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
	if errors.Is(w.err, context.Canceled) {
		w.err = nil
	}
}
