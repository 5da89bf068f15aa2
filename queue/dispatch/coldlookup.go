package dispatch

// The cold lookup: a result's task that the hot mirror does not hold, found in the database by
// one batched query for the writers (lookupBatches), a sender of bogus ids charged for it.

import (
	"context"
	"fmt"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
)

// lookup is a writer's request for a task the hot mirror does not hold.
type lookup struct {
	id    int64
	reply chan answers // buffered: the batcher never waits for a writer
}

// answers are the outcome of one batched lookup: the tasks found, or the error of the query.
type answers struct {
	infos map[int64]lease.TaskInfo
	err   error
}

// lookupBatches serves the writers' lookups until reqs is closed, one query at a time, each
// for every id asked for since the last one began (up to lookupBatchMax).
func (s *sink) lookupBatches(ctx context.Context, reqs <-chan lookup) {
	batch := make([]lookup, 0, lookupBatchMax)
	for first := range reqs {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < lookupBatchMax {
			select {
			case r, ok := <-reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		ids := make([]int64, len(batch))
		for i, r := range batch {
			ids[i] = r.id
		}
		a := s.taskInfos(ctx, ids)
		for _, r := range batch {
			r.reply <- a
		}
	}
}

// taskInfos runs one cold lookup query.
func (s *sink) taskInfos(ctx context.Context, ids []int64) answers {
	qctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	defer cancel()
	s.sec.lookups.Inc()
	infos, err := s.store.TaskInfos(qctx, ids)
	s.health.record("lookup", err)
	return answers{infos: infos, err: err}
}

// coldTask finds, in the database, a result's task that the hot mirror does not hold (see
// above). The sender is the peer of ctx (withPeer). A sender past its budget gets errParked,
// unless ctx carries the slow lane's answers (answersCtxKey, set by serveSlowLane).
func (s *sink) coldTask(ctx context.Context, id int64) (lease.TaskInfo, error) {
	sec := s.sec
	now := time.Now()
	if at, ok := sec.missing.Load(id); ok && now.Sub(at) < sec.cfg.MissingTTL {
		return lease.TaskInfo{}, fmt.Errorf("task %d (recently found missing): %w", id, queue.ErrNotFound)
	}
	p := peerOf(ctx)
	a, ok := ctx.Value(answersCtxKey{}).(answers)
	if !ok {
		if sec.spent(p, now) {
			return lease.TaskInfo{}, fmt.Errorf("task %d: %w", id, errParked)
		}
		sec.coldLookups.Add(1)
		req := lookup{id: id, reply: make(chan answers, 1)}
		select {
		case s.coldReqs <- req:
		case <-ctx.Done():
			return lease.TaskInfo{}, ctx.Err()
		}
		select {
		case a = <-req.reply:
		case <-ctx.Done():
			return lease.TaskInfo{}, ctx.Err()
		}
	}
	if a.err != nil {
		return lease.TaskInfo{}, a.err
	}
	t, ok := a.infos[id]
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
