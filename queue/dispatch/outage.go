package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Results that arrive while the database is away (docs/operations.md#networks) are held in
// memory, as received, up to Config.OutageHeldResults results and Config.OutageHeldBytes bytes,
// and placed and claimed once it is back. One past either bound is refused: it is dropped, its
// worker's lease expires and the task runs again. A held result is claimed like any other, so a
// result that another replica took meanwhile, or one that comes twice, is recorded once.

// outageHeld are the results held while the database is away.
type outageHeld struct {
	maxN     int
	maxBytes int64

	mu    sync.Mutex
	items []inbound
	bytes int64
	total int64 // results held so far (each once, however often it is held again)
	// refusedN counts the results refused past the bounds so far.
	refusedN int64

	wake    chan struct{}
	held    prometheus.Counter
	refused prometheus.Counter
}

func newOutageHeld(maxN int, maxBytes int64, reg prometheus.Registerer) *outageHeld {
	o := &outageHeld{maxN: maxN, maxBytes: maxBytes, wake: make(chan struct{}, 1),
		held: prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_results_held_total",
			Help: "Results received while the database was away and held in memory to be claimed once it is back."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_results_refused_total",
			Help: "Results received while the database was away past the bounds of those held (--outage-held-results, --outage-held-bytes): dropped, their tasks run again once their leases expire."}),
	}
	if reg != nil {
		_ = reg.Register(o.held)
		_ = reg.Register(o.refused)
		_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cortexq_results_held",
			Help: "Results held in memory now, waiting for the database to come back."},
			func() float64 { n, _, _ := o.counts(); return float64(n) }))
	}
	return o
}

// hold keeps in until the database is back; it reports false, and counts a refusal, when in
// would pass a bound.
func (o *outageHeld) hold(in inbound) bool {
	w := heldWeight(in.res.Data)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.items) >= o.maxN || o.bytes+w > o.maxBytes {
		o.refusedN++
		o.refused.Inc()
		return false
	}
	if !in.wasHeld {
		in.wasHeld = true
		o.total++
		o.held.Inc()
	}
	o.items = append(o.items, in)
	o.bytes += w
	return true
}

// take removes and returns up to n held results, oldest first.
func (o *outageHeld) take(n int) []inbound {
	o.mu.Lock()
	defer o.mu.Unlock()
	n = min(n, len(o.items))
	out := make([]inbound, n)
	copy(out, o.items)
	for _, in := range out {
		o.bytes -= heldWeight(in.res.Data)
	}
	clear(o.items[:n])
	o.items = o.items[n:]
	if len(o.items) == 0 {
		o.items = nil // let the backing array go
	}
	return out
}

// counts reports the results held now, and held and refused so far.
func (o *outageHeld) counts() (now int, total, refused int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.items), o.total, o.refusedN
}

// poke wakes the replay of held results; it never blocks.
func (o *outageHeld) poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// replayEvery is how often held results are tried again while the database is reachable (the
// end of an outage pokes the replay at once).
const replayEvery = time.Second

// replayHeld places the held results again whenever the database is reachable, once a
// replayEvery or when woken; it ends once stop is closed, after one last pass within ctx (the
// writers' grace).
func (s *sink) replayHeld(ctx context.Context, stop <-chan struct{}) {
	tick := time.NewTicker(replayEvery)
	defer tick.Stop()
	last := false
	for !last {
		select {
		case <-stop:
			last = true
		case <-ctx.Done():
			last = true
		case <-tick.C:
		case <-s.outage.wake:
		}
		// One pass over what is held now: a result held again (a lookup failed) waits for the
		// next tick or wake rather than being tried again at once.
		if !s.health.down.Load() && ctx.Err() == nil {
			n, _, _ := s.outage.counts()
			for _, in := range s.outage.take(n) {
				s.placeHeld(ctx, in)
			}
		}
	}
	if n, _, _ := s.outage.counts(); n > 0 {
		s.logger.Warn("held results not claimed before the stop: their tasks run again once their leases expire", "results", n)
		s.outage.take(n)
	}
}
