package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cortexq/cortexq/queue/lease"
)

// A message is "bogus" when it names a service that does not exist, or it is a result that
// names a task that does not exist, a task of another service, or one its sender may not
// answer (decided Unknown or NotHolder). A flood of them must cost the database a bounded
// amount per unit of time, and must never cost an honest result: mirrored tasks never wait;
// other lookups go through one batcher (lookupBatches, one connection at most); missing ids are
// remembered for MissingTTL; each peer (its CURVE key, else its IP address) has its own token
// bucket, and past it its results wait in the slow lane (looked up every slowLaneEvery, at most
// slowLaneMax held, then dropped as slow_lane_full). See docs/security.md#hostile-input.

// errBogusBudget is the error of a service lookup refused because the peer spent its budget.
var errBogusBudget = errors.New("the sender spent its budget for bogus names")

// errParked is the error of a task lookup that was not made at once because the sender is
// past its budget: the result goes to the slow lane.
var errParked = errors.New("the sender spent its budget for bogus task ids: looked up in the slow lane")

// Bounds of the slow lane.
const (
	slowLaneEvery = 200 * time.Millisecond
	slowLaneMax   = 4096
)

// lookupBatchMax is the most task ids one batched lookup asks for.
const lookupBatchMax = 1024

// bucket is a token bucket: rate tokens a second, at most burst.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64, burst int) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

func (b *bucket) refill(now time.Time) {
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
}

// spent reports whether less than one token is left.
func (b *bucket) spent(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	return b.tokens < 1
}

// take uses one token. The bucket may go into debt (down to -burst): lookups that passed the
// check together are all paid for, so the bound holds with concurrent writers.
func (b *bucket) take(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.tokens = max(b.tokens-1, -b.burst)
}

// peerBucket returns the peer's budget, making it on first use. The table is bounded: when it
// grows past maxPeers, budgets that are full again are forgotten (a full budget is what a new
// one would be).
func (sec *security) peerBucket(p peer, now time.Time) *bucket {
	const maxPeers = 4096
	name := p.budgetName()
	sec.peersMu.Lock()
	defer sec.peersMu.Unlock()
	if b := sec.peers[name]; b != nil {
		return b
	}
	if len(sec.peers) >= maxPeers {
		for n, b := range sec.peers {
			b.mu.Lock()
			b.refill(now)
			full := b.tokens >= b.burst
			b.mu.Unlock()
			if full {
				delete(sec.peers, n)
			}
		}
	}
	b := newBucket(sec.cfg.PeerBogusRate, sec.cfg.PeerBogusBurst)
	sec.peers[name] = b
	return b
}

// spent reports whether p spent its bogus budget.
func (sec *security) spent(p peer, now time.Time) bool {
	return sec.peerBucket(p, now).spent(now)
}

// charge counts a bogus message of p against its budget.
func (sec *security) charge(p peer, now time.Time) {
	sec.peerBucket(p, now).take(now)
}

// chargeOutcome charges p for a result the claim found bogus.
func (s *claimers) chargeOutcome(p peer, o lease.Outcome) {
	if o == lease.OutcomeUnknown || o == lease.OutcomeNotHolder {
		s.sec.charge(p, time.Now())
	}
}

// slowLane is the results of peers past their budget, waiting for their lookup.
type slowLane struct {
	mu     sync.Mutex
	parked []inbound
}

// park adds in to the slow lane; it reports false when the lane is full.
func (l *slowLane) park(in inbound) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.parked) >= slowLaneMax {
		return false
	}
	l.parked = append(l.parked, in)
	return true
}

// take empties the slow lane.
func (l *slowLane) take() []inbound {
	l.mu.Lock()
	defer l.mu.Unlock()
	parked := l.parked
	l.parked = nil
	return parked
}

// runSlowLane looks up the parked results every slowLaneEvery, in one query, and places them
// as a writer would. Once stop is closed (no writer parks any more) it serves what is left and
// returns.
func (s *sink) runSlowLane(ctx context.Context, stop <-chan struct{}) {
	tick := time.NewTicker(slowLaneEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.serveSlowLane(ctx)
		case <-stop:
			for s.serveSlowLane(ctx) {
			}
			return
		}
	}
}

// serveSlowLane looks up and places the parked results; it reports whether there were any.
func (s *sink) serveSlowLane(ctx context.Context) bool {
	parked := s.slow.take()
	if len(parked) == 0 {
		return false
	}
	ids := make([]int64, len(parked))
	for i, in := range parked {
		ids[i] = in.res.TaskID
	}
	s.sec.slowLookups.Add(1)
	actx := context.WithValue(ctx, answersCtxKey{}, s.taskInfos(ctx, ids))
	for _, in := range parked {
		s.place(actx, in)
	}
	return true
}

type (
	peerCtxKey    struct{}
	answersCtxKey struct{}
)

// withPeer returns ctx carrying the sender of the message being handled.
func withPeer(ctx context.Context, p peer) context.Context {
	return context.WithValue(ctx, peerCtxKey{}, p)
}

func peerOf(ctx context.Context) peer {
	p, _ := ctx.Value(peerCtxKey{}).(peer)
	return p
}
