package lease

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// workerTally is one worker's counters since the last FlushWorkers.
type workerTally struct {
	firstSeen, lastRequest, lastResult time.Time
	dispatched, results                int64
}

// tallies holds the worker counters of committed leases and claims until FlushWorkers writes
// them. Keeping them out of the lease and claim transactions matters: each of those would
// otherwise update the worker's row, and a lease and a claim of the same worker would wait on
// each other's commit.
type tallies struct {
	mu sync.Mutex
	m  map[workerKey]*workerTally
}

func (t *tallies) get(k workerKey, now time.Time) *workerTally {
	if t.m == nil {
		t.m = map[workerKey]*workerTally{}
	}
	wt := t.m[k]
	if wt == nil {
		wt = &workerTally{firstSeen: now}
		t.m[k] = wt
	}
	wt.firstSeen = minTime(wt.firstSeen, now)
	return wt
}

// committed adds what a committed transaction counted: leases per worker of one service, and
// results per worker and service.
func (t *tallies) committed(service int32, dispatched map[string]int64, results map[workerKey]int64, now time.Time) {
	if len(dispatched) == 0 && len(results) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, n := range dispatched {
		wt := t.get(workerKey{name, service}, now)
		wt.dispatched += n
		wt.lastRequest = maxTime(wt.lastRequest, now)
	}
	for k, n := range results {
		wt := t.get(k, now)
		wt.results += n
		wt.lastResult = maxTime(wt.lastResult, now)
	}
}

// take empties the tallies and returns what they held.
func (t *tallies) take() map[workerKey]*workerTally {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.m
	t.m = nil
	return m
}

// restore puts back tallies a failed flush took.
func (t *tallies) restore(m map[workerKey]*workerTally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, wt := range m {
		cur := t.get(k, wt.firstSeen)
		cur.dispatched += wt.dispatched
		cur.results += wt.results
		cur.lastRequest = maxTime(cur.lastRequest, wt.lastRequest)
		cur.lastResult = maxTime(cur.lastResult, wt.lastResult)
	}
}

// FlushWorkers writes the worker counters (the workers table) of everything committed since the
// last flush, in one statement. The dispatch server calls it every second and when it stops; a
// replica killed outright loses at most that second of counters, never an attempt (the attempts
// table is the exact record). On error the counters are kept for the next flush.
func (s *Store) FlushWorkers(ctx context.Context) error {
	m := s.tally.take()
	if len(m) == 0 {
		return nil
	}
	keys := make([]workerKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b workerKey) int { // one order everywhere: no deadlocks
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return cmp.Compare(a.service, b.service)
	})
	var p dbsqlc.WorkersTallyParams
	for _, k := range keys {
		wt := m[k]
		p.Names, p.ServiceIds = append(p.Names, k.name), append(p.ServiceIds, k.service)
		p.FirstSeens = append(p.FirstSeens, wt.firstSeen)
		p.LastRequests, p.LastResults = append(p.LastRequests, wt.lastRequest), append(p.LastResults, wt.lastResult)
		p.Dispatched, p.Results = append(p.Dispatched, wt.dispatched), append(p.Results, wt.results)
	}
	if err := dbsqlc.New(s.pool).WorkersTally(ctx, p); err != nil {
		s.tally.restore(m)
		return translate("write worker counters", err)
	}
	return nil
}

// RunWorkerFlusher calls FlushWorkers every interval until ctx ends, then once more with a short
// deadline of its own so a clean stop loses nothing.
func (s *Store) RunWorkerFlusher(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := s.FlushWorkers(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("worker counters not written; kept for the next try", "error", err)
			}
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := s.FlushWorkers(fctx); err != nil {
				s.logger.Warn("worker counters lost at stop", "error", err)
			}
			cancel()
			return
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
