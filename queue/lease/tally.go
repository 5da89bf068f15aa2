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
	// asked is when each worker last asked for work, leased or not (NoteRequest), at most
	// maxAsked of them between two flushes.
	asked map[workerKey]time.Time
}

// maxAsked bounds the workers whose requests one flush notes: a flood of identities that
// ask and never lease costs no more memory than this.
const maxAsked = 10_000

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

// NoteRequest notes that a worker asked for work of a service, whether it got some or not:
// the next FlushWorkers moves its last request (workers.last_request) if it is on record, so a
// worker polling an empty queue counts as active on the dashboard (docs/web.md#liveness). The
// time is this process's clock (NowFunc in tests): it decides no lease.
func (s *Store) NoteRequest(service int32, worker string) {
	now := time.Now()
	if s.cfg.NowFunc != nil {
		if t := s.cfg.NowFunc(); !t.IsZero() {
			now = t
		}
	}
	t := &s.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.asked == nil {
		t.asked = map[workerKey]time.Time{}
	}
	k := workerKey{worker, service}
	if _, ok := t.asked[k]; ok || len(t.asked) < maxAsked {
		t.asked[k] = now
	}
}

// takeAsked empties the requests noted and returns them.
func (t *tallies) takeAsked() map[workerKey]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.asked
	t.asked = nil
	return m
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
	if err := s.flushAsked(ctx); err != nil {
		return err
	}
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

// flushAsked writes the requests NoteRequest noted (a lost second of them on error: they only
// show liveness).
func (s *Store) flushAsked(ctx context.Context) error {
	asked := s.tally.takeAsked()
	if len(asked) == 0 {
		return nil
	}
	keys := make([]workerKey, 0, len(asked))
	for k := range asked {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b workerKey) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return cmp.Compare(a.service, b.service)
	})
	names, services, ats := make([]string, len(keys)), make([]int32, len(keys)), make([]time.Time, len(keys))
	for i, k := range keys {
		names[i], services[i], ats[i] = k.name, k.service, asked[k]
	}
	return translate("write worker requests", dbsqlc.New(s.pool).WorkersAsked(ctx, names, services, ats))
}

// HeartbeatEvery is how often a replica notes that it is up (replica_heartbeats), which the
// dashboard reads to tell a replica gone (docs/web.md#liveness).
const HeartbeatEvery = 5 * time.Second

// Heartbeat notes that this replica is up, or (stopped) that it stops.
func (s *Store) Heartbeat(ctx context.Context, stopped bool) error {
	return translate("heartbeat", dbsqlc.New(s.pool).ReplicaHeartbeat(ctx, s.cfg.Replica, stopped))
}

// RunWorkerFlusher calls FlushWorkers every interval until ctx ends, then once more with a short
// deadline of its own so a clean stop loses nothing. It writes the replica's heartbeat too: at
// start, every HeartbeatEvery, and "stopped" at the end.
func (s *Store) RunWorkerFlusher(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	beat := func(ctx context.Context, stopped bool) {
		if err := s.Heartbeat(ctx, stopped); err != nil && (stopped || ctx.Err() == nil) {
			s.logger.Warn("replica heartbeat not written", "error", err)
		}
	}
	beat(ctx, false)
	lastBeat := time.Now()
	for {
		select {
		case <-t.C:
			if err := s.FlushWorkers(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("worker counters not written; kept for the next try", "error", err)
			}
			if time.Since(lastBeat) >= HeartbeatEvery {
				beat(ctx, false)
				lastBeat = time.Now()
			}
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := s.FlushWorkers(fctx); err != nil {
				s.logger.Warn("worker counters lost at stop", "error", err)
			}
			beat(fctx, true)
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

// DemandFresh is how old another replica's note of its demand may be to count in a service's
// whole demand (NoteDemand): three of the notes each replica writes every second.
const DemandFresh = 3 * time.Second

// NoteDemand notes this replica's requests per second for each of services (rates, in the
// same order) and returns each one's whole demand, its own rate plus the other replicas' fresh
// notes (docs/performance.md#replicas-sharing-one-database): the dispatcher sizes its
// reservations by the service's demand, not by its own slice of it.
func (s *Store) NoteDemand(ctx context.Context, services []int32, rates []float64) (map[int32]float64, error) {
	rows, err := dbsqlc.New(s.pool).DemandNote(ctx, s.cfg.Replica, DemandFresh.Seconds(), services, rates)
	if err != nil {
		return nil, translate("note demand", err)
	}
	out := make(map[int32]float64, len(rows))
	for _, r := range rows {
		out[r.ServiceID] = r.Total
	}
	return out, nil
}
