package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cortexq/cortexq/queue/hot"
	"github.com/cortexq/cortexq/queue/internal/startstop"
	"github.com/cortexq/cortexq/queue/lease"
)

// upkeep is the service that keeps the hot mirror in step with the database (resync) and
// watches the file descriptors (fds.go), trimming the C heap after a wave of connections
// closed (trim.go).
type upkeep struct {
	*core
	bg startstop.Service
	// resyncNow asks for a resync of the hot mirror soon; resyncs counts those begun and those
	// done, so that a request held for the next one knows when it is over.
	resyncNow chan struct{}
	resyncs   struct{ begun, done atomic.Uint64 }
	// fdsPeak is the most file descriptors open since the C heap was last trimmed
	// (trimMemory), under trimMu: run's goroutine checks it, and so may a test or an
	// operator's call of watchFDs.
	trimMu  sync.Mutex
	fdsPeak int
}

func newUpkeep(c *core) *upkeep {
	// One resync asked for is enough for every request that asks meanwhile.
	u := &upkeep{core: c, resyncNow: make(chan struct{}, 1)}
	u.bg = startstop.Background(u.run)
	return u
}

// Start starts the upkeep's loop; Stop ends it.
func (s *upkeep) Start(ctx context.Context) error { return s.bg.Start(ctx) }

// Stop ends the upkeep's loop.
func (s *upkeep) Stop() { s.bg.Stop() }

// run resyncs the hot mirror, every hotResync and when asked (resyncSoon), and watches
// the file descriptors.
func (s *upkeep) run(ctx context.Context) {
	tick := time.NewTicker(hotResync)
	defer tick.Stop()
	var last time.Time
	var soon <-chan time.Time // the resync asked for, once hotResyncMin after the last
	fds := time.NewTicker(fdsWatch)
	defer fds.Stop()
	s.watchFDs()
	for {
		select {
		case <-ctx.Done():
			return
		case <-fds.C:
			s.watchFDs()
		case <-s.resyncNow:
			if soon == nil {
				soon = time.After(hotResyncMin - time.Since(last))
			}
		case <-soon:
			soon = nil
			s.resync(ctx)
			last = time.Now()
		case <-tick.C:
			s.resync(ctx)
			last = time.Now()
		}
	}
}

// resync rebuilds the hot mirror from this replica's in-flight rows in the database.
func (s *upkeep) resync(ctx context.Context) {
	s.resyncs.begun.Add(1)
	defer s.resyncs.done.Add(1)
	since := s.hot.Generation()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	defer cancel()
	rows, err := s.store.InFlightRows(rctx)
	s.health.record("resync", err)
	if err != nil {
		return
	}
	tasks := make([]hot.Task, len(rows))
	for i, r := range rows {
		tasks[i] = hot.Task{Task: r.Task, Worker: r.Worker}
		if s.sec.curve {
			tasks[i].Key = lease.KeyOfWorker(r.Worker)
		}
	}
	s.hot.Reset(tasks, since)
}

// resyncSoon asks for a resync of the hot mirror within hotResyncMin, and reports how many
// resyncs will have been done once it is over (compare resyncs.done).
func (s *upkeep) resyncSoon() uint64 {
	after := s.resyncs.begun.Load() + 1
	select {
	case s.resyncNow <- struct{}{}:
	default: // one is asked for already
	}
	return after
}
