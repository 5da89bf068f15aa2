package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
)

// A message is "bogus" when it names a service that does not exist, or it is a result that
// names a task that does not exist, a task of another service, or one its sender may not
// answer (decided Unknown or NotHolder). A flood of them must not become a database lookup per
// message: a task id found missing is remembered for MissingTTL, and each peer, and all peers
// together, have a budget of bogus results (a token bucket). A peer past its budget, or any
// peer while the common budget is spent, has its results for tasks this replica does not
// mirror dropped unlooked-at ("bogus_budget") until the budget refills. Results for tasks this
// replica leased itself never wait on a budget, and an honest peer's results for another
// replica's tasks (found) cost it nothing. So the lookups a flood causes are bounded by
// burst + rate × time, plus one per writer in flight.

// errBogusBudget is the error of a lookup refused because the peer spent its bogus budget.
var errBogusBudget = errors.New("the sender spent its budget for bogus task ids")

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

// spent reports whether p, or all peers together, spent the bogus budget.
func (sec *security) spent(p peer, now time.Time) bool {
	return sec.peerBucket(p, now).spent(now) || sec.global.spent(now)
}

// charge counts a bogus result of p against its budget and the common one.
func (sec *security) charge(p peer, now time.Time) {
	sec.peerBucket(p, now).take(now)
	sec.global.take(now)
}

// chargeOutcome charges p for a result the claim found bogus.
func (s *Server) chargeOutcome(p peer, o lease.Outcome) {
	if o == lease.OutcomeUnknown || o == lease.OutcomeNotHolder {
		s.sec.charge(p, time.Now())
	}
}

// coldTask looks up, in the database, a result's task that the hot mirror does not hold,
// within the sender's bogus budget (see above). The sender is the peer of ctx (withPeer).
func (s *Server) coldTask(ctx context.Context, id int64) (lease.TaskInfo, error) {
	sec := s.sec
	now := time.Now()
	if at, ok := sec.missing.Load(id); ok && now.Sub(at) < sec.cfg.MissingTTL {
		return lease.TaskInfo{}, fmt.Errorf("task %d (recently found missing): %w", id, queue.ErrNotFound)
	}
	p := peerOf(ctx)
	if sec.spent(p, now) {
		sec.limited.Inc()
		if n, emit := sec.bogusLog.Record(); emit {
			s.logger.Warn("results for unknown tasks over budget: dropped without a lookup", "count", n,
				"peer", p.budgetName(), "task_id", id)
		}
		return lease.TaskInfo{}, fmt.Errorf("task %d: %w", id, errBogusBudget)
	}
	sec.coldLookups.Add(1)
	sec.lookups.Inc()
	infos, err := s.store.TaskInfos(ctx, []int64{id})
	s.health.record(err)
	if err != nil {
		return lease.TaskInfo{}, err
	}
	t, ok := infos[id]
	if !ok {
		sec.charge(p, now)
		if sec.missing.Size() >= 1<<16 {
			sec.missing.Clear()
		}
		sec.missing.Store(id, now)
		return lease.TaskInfo{}, fmt.Errorf("task %d: %w", id, queue.ErrNotFound)
	}
	return t, nil
}

type peerCtxKey struct{}

// withPeer returns ctx carrying the sender of the message being handled.
func withPeer(ctx context.Context, p peer) context.Context {
	return context.WithValue(ctx, peerCtxKey{}, p)
}

func peerOf(ctx context.Context) peer {
	p, _ := ctx.Value(peerCtxKey{}).(peer)
	return p
}
