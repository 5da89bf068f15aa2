package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/cortexq/cortexq/queue/lease"
)

// attributeMax is the most hand-outs one attribution statement records.
const attributeMax = 1024

// attributor makes the ventilator's hand-outs durable (DESIGN §4 "Attribute"): it writes the
// workers of the hand-outs gathered while its last statement ran, in one statement, so a
// hand-out is attributed within about one statement's time of being sent, and the statements
// grow with the load rather than their number.
type attributor struct {
	s    *Server
	mu   sync.Mutex
	todo []lease.HandOut
	wake chan struct{}
}

func newAttributor(s *Server) *attributor {
	return &attributor{s: s, wake: make(chan struct{}, 1)}
}

// add queues a hand-out for attribution.
func (a *attributor) add(h lease.HandOut) {
	a.mu.Lock()
	a.todo = append(a.todo, h)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// take removes up to attributeMax queued hand-outs, oldest first.
func (a *attributor) take() []lease.HandOut {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := min(len(a.todo), attributeMax)
	if n == 0 {
		return nil
	}
	batch := make([]lease.HandOut, n)
	copy(batch, a.todo)
	a.todo = append(a.todo[:0], a.todo[n:]...)
	return batch
}

// putBack returns a batch that could not be written to the front of the queue.
func (a *attributor) putBack(batch []lease.HandOut) {
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
	for {
		if ctx.Err() != nil && final.IsZero() {
			final = time.Now().Add(attributeFinal)
		}
		batch := a.take()
		if len(batch) == 0 {
			if !final.IsZero() {
				return
			}
			select {
			case <-a.wake:
			case <-ctx.Done():
			}
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
		a.putBack(batch)
		backoff = min(max(2*backoff, 50*time.Millisecond), 2*time.Second)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
	}
}

// write attributes one batch and reports whether it was written.
func (a *attributor) write(ctx context.Context, batch []lease.HandOut) bool {
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	leases, err := a.s.store.Attribute(tctx, batch)
	cancel()
	a.s.health.record(err)
	if err != nil {
		a.s.metrics.dbErrors.WithLabelValues("attribute").Inc()
		a.s.logger.Warn("attribution failed; retrying", "hand_outs", len(batch), "error", err)
		return false
	}
	a.s.metrics.attrSeconds.Observe(time.Since(start).Seconds())
	a.s.metrics.attributeBatch.Observe(float64(len(batch)))
	a.s.metrics.attributionsSkipped.Add(float64(len(batch) - len(leases)))
	recorded := make(map[int64]bool, len(leases))
	for _, l := range leases {
		recorded[l.TaskID] = true
	}
	for _, h := range batch {
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
