package dispatch

import (
	"context"
	"maps"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v4"

	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
)

// The ventilator's stock (docs/semantics.md#reserve and #hand-out): per service with waiting
// workers, tasks reserved ahead of demand, handed to requests from memory.

// reserveMin is the least a stock aims at while workers ask; the most is Config.ReserveBatch.
const reserveMin = 16

// demandWindow is the span of requests a stock is sized by; idleAfter is how long a service
// may go without a request before its stock is released.
const (
	demandWindow = 100 * time.Millisecond
	idleAfter    = 2 * time.Second
	// checkEvery is how often the stock is checked against the database: a reservation taken
	// back (pause, rerun, delete, deadline) leaves the stock within about this long.
	checkEvery = 500 * time.Millisecond
	// dryRetry is how long after a reserve that came back short (the backlog is dry) the next
	// reserve for the same service begins: while workers keep asking of a drained service, each
	// replica asks the database at most this often, not as fast as its leasers go (each empty
	// reserve runs the full path, docs/performance.md#replicas-sharing-one-database).
	dryRetry = 100 * time.Millisecond
	// demandEvery is how often the replica notes its demand per service in the database and
	// reads the whole service's (lease.Store.NoteDemand).
	demandEvery = time.Second
)

// stockItem is a reserved task waiting for a request. at is when its reserve began, local
// monotonic time, which is before the database stamped the reservation: its age is never
// under-counted.
type stockItem struct {
	r  lease.Reserved
	at time.Time
	// ready is when its reservation came back: the start of its reservation stage
	// (docs/stages.md).
	ready time.Time
}

type stock struct {
	service catalog.Service
	items   []stockItem
	demand  demand
	last    time.Time // the last request
	// reserving: a reserve job for this service is under way, of n tasks.
	reserving bool
	n         int
	// dryAt: the last reserve found fewer tasks than it asked for, and began then. Requests
	// older than that which the stock cannot serve get no work.
	dry   bool
	dryAt time.Time
	// asked counts the requests since the demand was last noted; noted is the rate last noted,
	// and share the service's whole demand over it (1 while this replica is alone, or unknown):
	// the stock is sized as if this replica served the whole service's demand, so that several
	// replicas reserve in batches as large as one would (docs/performance.md#replicas-sharing-one-database).
	asked int
	noted float64
	share float64
}

// demand counts requests over the last demandWindow, in ten buckets.
type demand struct {
	buckets [10]int
	last    int64 // the newest bucket's number
}

func (d *demand) advance(now time.Time) {
	b := now.UnixMilli() / int64(demandWindow/time.Millisecond/10)
	if b-d.last >= int64(len(d.buckets)) {
		clear(d.buckets[:])
	} else {
		for i := d.last + 1; i <= b; i++ {
			d.buckets[i%int64(len(d.buckets))] = 0
		}
	}
	d.last = max(d.last, b)
}

func (d *demand) add(now time.Time) {
	d.advance(now)
	d.buckets[d.last%int64(len(d.buckets))]++
}

func (d *demand) count(now time.Time) int {
	d.advance(now)
	n := 0
	for _, c := range d.buckets {
		n += c
	}
	return n
}

// jobKind is what a leaser does for the ventilator.
type jobKind int

const (
	jobReserve jobKind = iota
	jobRelease
	jobCheck
	jobDemand
)

// jobNames name the jobs in the outage's log lines.
var jobNames = map[jobKind]string{jobReserve: "reserve", jobRelease: "release", jobCheck: "check_stock", jobDemand: "demand"}

// leaseJob is one transaction a leaser runs for the ventilator.
type leaseJob struct {
	kind    jobKind
	service catalog.Service
	n       int              // jobReserve: how many
	items   []lease.Reserved // jobRelease: what to give back
	ids     []int64          // jobCheck: which reservations to check
	rates   []demandRate     // jobDemand: this replica's requests per second, per service
	issued  time.Time
}

type leaseDone struct {
	job      leaseJob
	reserved []lease.Reserved
	still    map[int64]bool
	whole    map[int32]float64 // jobDemand: each service's whole demand
	err      error
}

// demandRate is a service's requests per second at this replica since the last note.
type demandRate struct {
	service int32
	rate    float64
}

// leaser runs the ventilator's jobs and pokes it when one is done.
func (v *ventilator) leaser(ctx context.Context, poke func()) {
	// A job that has begun finishes even during a stop: reservations are then released.
	dbctx := context.WithoutCancel(ctx)
	for job := range v.jobs {
		d := leaseDone{job: job}
		tctx, cancel := context.WithTimeout(dbctx, v.s.cfg.DBTimeout)
		start := time.Now()
		switch job.kind {
		case jobReserve:
			d.reserved, d.err = v.s.store.Reserve(tctx, lease.ReserveRequest{
				ServiceID: job.service.ID, LeaseTimeout: job.service.LeaseTimeout, Max: job.n})
			v.s.metrics.leaseSeconds.Observe(time.Since(start).Seconds())
			v.s.metrics.reserveBatch.Observe(float64(len(d.reserved)))
		case jobRelease:
			var n int
			n, d.err = v.s.store.Release(tctx, job.items)
			v.s.metrics.returns.Add(float64(n))
		case jobCheck:
			d.still, d.err = v.s.store.StillReserved(tctx, job.ids)
		case jobDemand:
			ids, rates := make([]int32, len(job.rates)), make([]float64, len(job.rates))
			for i, r := range job.rates {
				ids[i], rates[i] = r.service, r.rate
			}
			d.whole, d.err = v.s.store.NoteDemand(tctx, ids, rates)
		}
		cancel()
		v.s.health.record(jobNames[job.kind], d.err)
		v.done <- d
		poke()
	}
}

// submit hands a job to a free leaser; it reports false when none is free.
func (v *ventilator) submit(job leaseJob) bool {
	if int(v.leasing.Load()) >= v.s.cfg.Leasers {
		return false
	}
	job.issued = time.Now()
	v.leasing.Add(1)
	v.jobs <- job
	return true
}

// stockOf returns the service's stock, made on first use.
func (v *ventilator) stockOf(svc catalog.Service) *stock {
	st := v.stock[svc.ID]
	if st == nil {
		st = &stock{service: svc}
		v.stock[svc.ID] = st
	}
	st.service = svc
	return st
}

// finish takes in a done job.
func (v *ventilator) finish(d leaseDone) {
	v.leasing.Add(-1)
	switch d.job.kind {
	case jobReserve:
		st := v.stockOf(d.job.service)
		st.reserving = false
		if d.err != nil {
			// Logged by the outage's lines (dblink.go), not once per reservation.
			v.s.metrics.dbErrors.WithLabelValues("reserve").Inc()
			v.refuseOlder(st, d.job.issued, "db_error")
			return
		}
		ready := time.Now()
		for _, r := range d.reserved {
			st.items = append(st.items, stockItem{r: r, at: d.job.issued, ready: ready})
			v.s.stocks.in(r.TaskID)
		}
		st.dry = len(d.reserved) < d.job.n
		if st.dry {
			st.dryAt = d.job.issued
		}
	case jobRelease:
		if d.err != nil && !v.s.health.down.Load() {
			v.s.logger.Warn("reservations not released; the reaper takes them back at their deadline",
				"tasks", len(d.job.items), "error", d.err)
		}
	case jobDemand:
		v.shares(d)
	case jobCheck:
		if d.err != nil {
			return
		}
		checked := make(map[int64]bool, len(d.job.ids))
		for _, id := range d.job.ids {
			checked[id] = true
		}
		for _, st := range v.stock {
			kept := st.items[:0]
			for _, it := range st.items {
				if checked[it.r.TaskID] && !d.still[it.r.TaskID] {
					v.s.stocks.out(it.r.TaskID)
					v.s.metrics.reservationsLost.Inc()
					continue
				}
				kept = append(kept, it)
			}
			clear(st.items[len(kept):])
			st.items = kept
		}
	}
}

// refuseOlder answers no work to the service's pending requests that came before at.
func (v *ventilator) refuseOlder(st *stock, at time.Time, reason string) {
	p := v.pending[st.service.ID]
	if p == nil {
		return
	}
	p.reqs = slices.DeleteFunc(p.reqs, func(r *request) bool {
		if r.at.After(at) {
			return false
		}
		v.mock(r.identity, reason)
		delete(v.waiting, string(r.identity))
		v.unask(r)
		return true
	})
	v.dropEmptyPending()
}

// dropEmptyPending forgets services with no pending request.
func (v *ventilator) dropEmptyPending() {
	v.order = slices.DeleteFunc(v.order, func(id int32) bool {
		if p := v.pending[id]; p == nil || len(p.reqs) == 0 {
			delete(v.pending, id)
			return true
		}
		return false
	})
}

// handOutMaxAge is the oldest a reservation may be to be handed out: well inside its TTL, so
// the reaper never takes back a task this replica is handing out.
func (v *ventilator) handOutMaxAge() time.Duration { return v.s.store.Config().ReservationTTL / 3 }

// serve hands stocked tasks to pending requests, oldest first, and answers no work to those the
// last short reserve found nothing for.
//
// While the sink's backlog (replies received, not yet claimed) is a full claim batch or more,
// nothing is handed out: the sink is then the slowest stage, and more hand-outs would only add
// to every result's latency. See docs/performance.md#sink-backpressure.
func (v *ventilator) serve(ctx context.Context, now time.Time) {
	if v.s.hot.Replied() >= v.s.cfg.ClaimBatch {
		v.claims.backpressured.Store(true) // the next claim wakes the loop (claimers.claimer)
		return
	}
	oldest := now.Add(-v.handOutMaxAge())
	for _, id := range v.order {
		p := v.pending[id]
		st := v.stock[id]
		p.reqs = slices.DeleteFunc(p.reqs, func(r *request) bool {
			if st != nil {
				i := slices.IndexFunc(st.items, func(it stockItem) bool { return it.at.After(oldest) && it.r.For(r.worker) })
				if i >= 0 {
					it := st.items[i]
					st.items = slices.Delete(st.items, i, i+1)
					v.s.stocks.out(it.r.TaskID) // before the first byte: its result may come at once
					delete(v.waiting, string(r.identity))
					v.unask(r)
					v.handOut(ctx, st, r, it)
					return true
				}
				if st.dry && !r.at.After(st.dryAt) && !st.reserving {
					v.mock(r.identity, "no_work")
					delete(v.waiting, string(r.identity))
					v.unask(r)
					return true
				}
			}
			return false
		})
	}
	v.dropEmptyPending()
}

// handOut sends a stocked task to a request's worker and queues its attribution. A worker
// found unroutable gets nothing, and the task goes back to the stock.
func (v *ventilator) handOut(ctx context.Context, st *stock, r *request, it stockItem) {
	l := it.r.Lease(r.worker)
	if !v.sendTask(ctx, r, l, it.ready) {
		st.items = slices.Insert(st.items, 0, it)
		v.s.stocks.in(it.r.TaskID)
		return
	}
	v.attrib.add(it.r.HandOut(r.worker))
}

// plan starts the jobs the stocks need: a reserve where a stock runs low while workers ask, a
// release of what is too old or no longer asked for, and a periodic check against the
// database.
func (v *ventilator) plan(now time.Time) {
	room := v.s.cfg.MaxInFlight - v.s.hot.Len() - v.s.stocks.len()
	for _, st := range v.stock {
		if st.reserving {
			room -= st.n
		}
	}
	var stale []lease.Reserved
	oldest := now.Add(-v.handOutMaxAge())
	down := v.s.health.down.Load() // no reservation is tried while the database is away
	for _, st := range v.stock {
		idle := now.Sub(st.last) > idleAfter
		st.items = slices.DeleteFunc(st.items, func(it stockItem) bool {
			if idle || !it.at.After(oldest) {
				stale = append(stale, it.r)
				v.s.stocks.out(it.r.TaskID)
				return true
			}
			return false
		})
		if st.reserving || idle || down {
			continue
		}
		pending := 0
		if p := v.pending[st.service.ID]; p != nil {
			pending = len(p.reqs)
		}
		target := min(max(int(float64(st.demand.count(now))*max(st.share, 1)), reserveMin), v.s.cfg.ReserveBatch)
		need := 0
		switch {
		case pending > len(st.items) && (!st.dry || now.Sub(st.dryAt) >= dryRetry):
			need = min(pending-len(st.items)+target, v.s.cfg.ReserveBatch)
		case !st.dry && len(st.items) < target/2:
			need = target - len(st.items)
		}
		need = min(need, room)
		if need <= 0 {
			continue
		}
		if !v.submit(leaseJob{kind: jobReserve, service: st.service, n: need}) {
			break
		}
		st.reserving, st.n = true, need
		room -= need
	}
	if len(stale) > 0 {
		if !v.submit(leaseJob{kind: jobRelease, items: stale}) {
			v.pendingRelease = append(v.pendingRelease, stale...)
		}
	}
	if len(v.pendingRelease) > 0 && v.submit(leaseJob{kind: jobRelease, items: v.pendingRelease}) {
		v.pendingRelease = nil
	}
	v.noteDemand(now)
	if now.Sub(v.lastCheck) >= checkEvery && v.s.stocks.len() > 0 {
		var ids []int64
		for _, st := range v.stock {
			for _, it := range st.items {
				ids = append(ids, it.r.TaskID)
			}
		}
		if v.submit(leaseJob{kind: jobCheck, ids: ids}) {
			v.lastCheck = now
		}
	}
}

// noteDemand notes, every demandEvery, each service's requests per second at this replica
// (those asked since the last note, and those noted before and idle now, at 0), through a
// leaser: the answer, the services' whole demand, sets the stocks' shares (shares).
//
// Counting starts at the first request; for demandEvery after it, the notes come every
// demandWindow instead, so that a replica's first second is not sized by its own slice alone.
func (v *ventilator) noteDemand(now time.Time) {
	if v.demandFrom.IsZero() {
		for _, st := range v.stock {
			if st.asked > 0 {
				v.demandFrom, v.lastDemand = now, now
			}
		}
		return
	}
	every := demandEvery
	if now.Sub(v.demandFrom) < demandEvery {
		every = demandWindow
	}
	if now.Sub(v.lastDemand) < every {
		return
	}
	secs := now.Sub(v.lastDemand).Seconds()
	var rates []demandRate
	for _, id := range slices.Sorted(maps.Keys(v.stock)) {
		st := v.stock[id]
		if st.asked == 0 && st.noted == 0 {
			continue
		}
		rates = append(rates, demandRate{service: id, rate: float64(st.asked) / secs})
	}
	if len(rates) == 0 {
		v.lastDemand = now
		return
	}
	if !v.submit(leaseJob{kind: jobDemand, rates: rates}) {
		return // no free leaser: the next loop tries again, with the requests counted since
	}
	v.lastDemand = now
	for _, r := range rates {
		st := v.stock[r.service]
		st.asked, st.noted = 0, r.rate
	}
}

// shares takes in a demand note's answer: each stock's share is its service's whole demand over
// this replica's own (1 when this replica's is none, or on error), and the sink's claims wait
// for their batch as many times ClaimFlush as the replicas' demand is of this one's, all
// services together (claimers.share).
func (v *ventilator) shares(d leaseDone) {
	var own, whole float64
	for _, r := range d.job.rates {
		st := v.stock[r.service]
		st.share = 1
		if d.err == nil && r.rate > 0 {
			st.share = max(d.whole[r.service]/r.rate, 1)
			own, whole = own+r.rate, whole+d.whole[r.service]
		}
	}
	share := 1.0
	if own > 0 {
		share = min(whole/own, claimShareMax)
	}
	v.claims.share.Store(math.Float64bits(share))
	if d.err != nil {
		v.s.logger.Debug("demand not noted; reservations sized by this replica's own", "error", d.err)
	}
}

// releaseStock gives back every stocked task, for a stop.
func (v *ventilator) releaseStock() {
	for _, st := range v.stock {
		for _, it := range st.items {
			v.pendingRelease = append(v.pendingRelease, it.r)
			v.s.stocks.out(it.r.TaskID)
		}
		st.items = nil
	}
	if len(v.pendingRelease) > 0 && v.submit(leaseJob{kind: jobRelease, items: v.pendingRelease}) {
		v.pendingRelease = nil
	}
}

// stockIDs are the tasks in the ventilator's stock, for the other goroutines: the sink drops a
// reply for a task this replica reserved and never handed out (lease.Store.BeginClaim's stocked).
type stockIDs struct {
	ids *xsync.Map[int64, struct{}]
	n   atomic.Int64
}

func newStockIDs() *stockIDs { return &stockIDs{ids: xsync.NewMap[int64, struct{}]()} }

func (s *stockIDs) in(id int64) {
	if _, loaded := s.ids.LoadOrStore(id, struct{}{}); !loaded {
		s.n.Add(1)
	}
}

func (s *stockIDs) out(id int64) {
	if _, loaded := s.ids.LoadAndDelete(id); loaded {
		s.n.Add(-1)
	}
}

func (s *stockIDs) has(id int64) bool {
	_, ok := s.ids.Load(id)
	return ok
}

func (s *stockIDs) len() int { return int(s.n.Load()) }
