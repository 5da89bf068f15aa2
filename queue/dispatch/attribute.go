package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/cortexq/cortexq/queue/lease"
)

// attributeMax is the most hand-outs one attribution statement records.
const attributeMax = 1024

// attributeDelay is how long a hand-out waits before its attribution is written. A task whose
// result comes back sooner needs none: its claim records the attempt (the same path that
// serves a replica that died before attributing), which saves a statement and its row locks
// per task on fast services. The cost is a crash window that much wider, and an attempt's
// leased_at taken at its claim rather than at its hand-out (see docs on the crash windows).
const attributeDelay = 100 * time.Millisecond

// attributor makes the ventilator's hand-outs durable (docs/semantics.md#attribute): once a hand-out
// is attributeDelay old it writes it, with the others due, in one statement, unless its result
// came back first; so a hand-out is attributed within about attributeDelay and one statement's
// time of being sent, and the statements grow with the load rather than their number.
type attributor struct {
	s    *core
	mu   sync.Mutex
	todo []handOut // in hand-out order
	wake chan struct{}
}

// handOut is a hand-out waiting for its attribution, with when it was sent (or last put off).
type handOut struct {
	lease.HandOut
	at     time.Time
	putOff int // times put off because its result was in, waiting for its claim
}

// attributePutOffs bounds how often a hand-out whose result came back is put off for its
// claim: a claim that failed leaves the task mirrored, and its attribution is then written.
const attributePutOffs = 3

func newAttributor(s *core) *attributor {
	return &attributor{s: s, wake: make(chan struct{}, 1)}
}

// add queues a hand-out for attribution.
func (a *attributor) add(h lease.HandOut) {
	a.mu.Lock()
	wasEmpty := len(a.todo) == 0
	a.todo = append(a.todo, handOut{HandOut: h, at: time.Now()})
	a.mu.Unlock()
	if !wasEmpty {
		return // the run loop is already timed for the oldest one
	}
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// take removes up to attributeMax queued hand-outs sent before due, oldest first. When none is
// due it returns when the oldest one will be (zero if none is queued).
func (a *attributor) take(due time.Time) ([]handOut, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for n < len(a.todo) && n < attributeMax && !a.todo[n].at.After(due) {
		n++
	}
	if n == 0 {
		if len(a.todo) == 0 {
			return nil, time.Time{}
		}
		return nil, a.todo[0].at
	}
	batch := make([]handOut, n)
	copy(batch, a.todo)
	a.todo = append(a.todo[:0], a.todo[n:]...)
	return batch, time.Time{}
}

// putBack returns a batch that could not be written to the front of the queue.
func (a *attributor) putBack(batch []handOut) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.todo = append(batch, a.todo...)
}

// attributeFinal bounds the attribution of the last hand-outs once the replica stops.
const attributeFinal = 10 * time.Second

// run writes attributions until ctx is done and then, for up to attributeFinal, the hand-outs
// still queued. A failed statement is retried with a growing pause; the hand-outs it could not
// record are the reaper's at their reservation deadline (and a result for one is accepted).
func (a *attributor) run(ctx context.Context) {
	backoff := time.Duration(0)
	final := time.Time{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if ctx.Err() != nil && final.IsZero() {
			final = time.Now().Add(attributeFinal)
		}
		due := time.Now().Add(-attributeDelay)
		if !final.IsZero() {
			due = time.Now() // stopping: every hand-out is due
		}
		batch, oldest := a.take(due)
		if len(batch) == 0 {
			if !final.IsZero() {
				return
			}
			if !oldest.IsZero() {
				timer.Reset(time.Until(oldest.Add(attributeDelay)))
			}
			select {
			case <-a.wake:
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
			continue
		}
		if !final.IsZero() && time.Now().After(final) {
			a.s.logger.Error("attributions not written before the stop; the tasks are recovered at their reservation deadline",
				"hand_outs", len(batch))
			return
		}
		if a.write(context.WithoutCancel(ctx), batch) {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, 50*time.Millisecond), 2*time.Second)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
	}
}

// write attributes one batch and reports whether it was written (or needed no statement); what
// it could not write it puts back. A hand-out whose task left the mirror (claimed, or taken
// back) needs no attribution; one whose result came back is put off for its claim to record, a
// few times at most.
func (a *attributor) write(ctx context.Context, batch []handOut) bool {
	var now, later []handOut
	for _, h := range batch {
		t, ok := a.s.hot.Get(h.TaskID)
		switch {
		case !ok:
			a.s.metrics.attributionsSkipped.Inc()
		case t.Replied() && h.putOff < attributePutOffs:
			h.putOff++
			later = append(later, h)
		default:
			now = append(now, h)
		}
	}
	if len(later) > 0 {
		at := time.Now()
		a.mu.Lock()
		for _, h := range later {
			h.at = at
			a.todo = append(a.todo, h)
		}
		a.mu.Unlock()
	}
	if len(now) == 0 {
		return true
	}
	hs := make([]lease.HandOut, len(now))
	for i, h := range now {
		hs[i] = h.HandOut
	}
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, a.s.cfg.DBTimeout)
	leases, err := a.s.store.Attribute(tctx, hs)
	cancel()
	a.s.health.record("attribute", err) // which logs the failure (dblink.go), not each retry
	if err != nil {
		a.s.metrics.dbErrors.WithLabelValues("attribute").Inc()
		a.putBack(now)
		return false
	}
	a.s.metrics.attrSeconds.Observe(time.Since(start).Seconds())
	a.s.metrics.attributeBatch.Observe(float64(len(hs)))
	a.s.metrics.attributionsSkipped.Add(float64(len(hs) - len(leases)))
	recorded := make(map[int64]bool, len(leases))
	for _, l := range leases {
		recorded[l.TaskID] = true
	}
	for _, h := range hs {
		if recorded[h.TaskID] {
			a.s.hot.Attributed(h.TaskID)
			continue
		}
		// Skipped: a claim (of any replica) recorded the attempt first, or the reservation was
		// taken back. Either way it is not this replica's lease in flight: it no longer counts
		// against its worker's cap here, which a resync would find only later.
		a.s.hot.Delete(h.TaskID)
	}
	return true
}
