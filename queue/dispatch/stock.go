package dispatch

import (
	"context"
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
)

// stockItem is a reserved task waiting for a request. at is when its reserve began, local
// monotonic time, which is before the database stamped the reservation: its age is never
// under-counted.
type stockItem struct {
	r  lease.Reserved
	at time.Time
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
)

// leaseJob is one transaction a leaser runs for the ventilator.
type leaseJob struct {
	kind    jobKind
	service catalog.Service
	n       int              // jobReserve: how many
	items   []lease.Reserved // jobRelease: what to give back
	ids     []int64          // jobCheck: which reservations to check
	issued  time.Time
}

type leaseDone struct {
	job      leaseJob
	reserved []lease.Reserved
	still    map[int64]bool
	err      error
}

// leaser runs the ventilator's jobs and pokes it when one is done.
func (v *ventilator) leaser(ctx context.Context, poke func()) {
	// A job that has begun finishes even during a stop: reservations are then released.
	dbctx := context.WithoutCancel(ctx)
	for job := range v.jobs {
		d := leaseDone{job: job}
		tctx, cancel := context.WithTimeout(dbctx, 30*time.Second)
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
		}
		cancel()
		v.s.health.record(d.err)
		v.done <- d
		poke()
	}
}

// submit hands a job to a free leaser; it reports false when none is free.
func (v *ventilator) submit(job leaseJob) bool {
	if int(v.s.leasing.Load()) >= v.s.cfg.Leasers {
		return false
	}
	job.issued = time.Now()
	v.s.leasing.Add(1)
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
	v.s.leasing.Add(-1)
	switch d.job.kind {
	case jobReserve:
		st := v.stockOf(d.job.service)
		st.reserving = false
		if d.err != nil {
			v.s.metrics.dbErrors.WithLabelValues("reserve").Inc()
			v.s.logger.Error("reservation failed; waiting requests get no work", "service", d.job.service.Name, "error", d.err)
			v.refuseOlder(st, d.job.issued, "db_error")
			return
		}
		for _, r := range d.reserved {
			st.items = append(st.items, stockItem{r: r, at: d.job.issued})
			v.s.stocks.in(r.TaskID)
		}
		st.dry = len(d.reserved) < d.job.n
		if st.dry {
			st.dryAt = d.job.issued
		}
	case jobRelease:
		if d.err != nil {
			v.s.logger.Warn("reservations not released; the reaper takes them back at their deadline",
				"tasks", len(d.job.items), "error", d.err)
		}
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
		v.s.backpressured.Store(true) // the next claim wakes the loop (Server.claimer)
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
	if !v.sendTask(ctx, r, l) {
		st.items = slices.Insert(st.items, 0, it)
		v.s.stocks.in(it.r.TaskID)
		return
	}
	v.s.attrib.add(it.r.HandOut(r.worker))
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
		if st.reserving || idle {
			continue
		}
		pending := 0
		if p := v.pending[st.service.ID]; p != nil {
			pending = len(p.reqs)
		}
		target := min(max(st.demand.count(now), reserveMin), v.s.cfg.ReserveBatch)
		need := 0
		switch {
		case pending > len(st.items):
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
// reply for a task this replica reserved and never handed out (lease.ClaimHooks.Stocked).
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
