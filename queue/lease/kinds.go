package lease

import (
	"context"
	"fmt"
	"sync"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// kindKey is a message's (severity, category, what): a row of message_kinds
// (migrations/00015_message_logs.sql), which stores a log as the ids of its messages' kinds.
type kindKey struct {
	severity queue.Severity
	category string
	what     string
}

func keyOf(m queue.Message) kindKey { return kindKey{m.Severity, m.Category, m.What} }

// kindCacheMax bounds the ids a replica keeps: past it the cache starts over (a log of made-up
// whats costs a statement per new kind, not memory).
const kindCacheMax = 1 << 16

// kindCache holds message_kinds ids this replica has seen committed. Rows of message_kinds are
// never deleted or changed, so an id once seen stays right.
type kindCache struct {
	mu  sync.RWMutex
	ids map[kindKey]int32
}

func (c *kindCache) get(k kindKey) (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.ids[k]
	return id, ok
}

func (c *kindCache) put(rows []dbsqlc.MessageKindsEnsureRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil || len(c.ids)+len(rows) > kindCacheMax {
		c.ids = make(map[kindKey]int32, len(rows))
	}
	for _, r := range rows {
		c.ids[kindKey{queue.Severity(r.Severity), r.Category, r.What}] = r.ID
	}
}

// kindIDs finds the ids of the kinds of msgs, adding the missing ones to message_kinds through
// q, into ids. With cache set (q is not inside a transaction: what it adds is committed) the
// ids found go into the replica's cache too.
func (s *Store) kindIDs(ctx context.Context, q *dbsqlc.Queries, msgs func(yield func(queue.Message) bool), ids map[kindKey]int32, cache bool) error {
	var sevs, cats, whats []string
	want := map[kindKey]bool{}
	for m := range msgs {
		k := keyOf(m)
		if _, ok := ids[k]; ok || want[k] {
			continue
		}
		if id, ok := s.kinds.get(k); ok {
			ids[k] = id
			continue
		}
		want[k] = true
		sevs, cats, whats = append(sevs, string(k.severity)), append(cats, k.category), append(whats, k.what)
	}
	// A kind another transaction adds at the same time is not in the statement's snapshot: the
	// next statement sees it (or adds it, if that transaction rolled back).
	for try := 0; len(want) > 0; try++ {
		if try == 5 {
			return fmt.Errorf("message kinds: %d still missing after %d tries", len(want), try)
		}
		rows, err := q.MessageKindsEnsure(ctx, sevs, cats, whats)
		if err != nil {
			return fmt.Errorf("message kinds: %w", err)
		}
		if cache {
			s.kinds.put(rows)
		}
		for _, r := range rows {
			k := kindKey{queue.Severity(r.Severity), r.Category, r.What}
			ids[k] = r.ID
			delete(want, k)
		}
		sevs, cats, whats = sevs[:0], cats[:0], whats[:0]
		for k := range want {
			sevs, cats, whats = append(sevs, string(k.severity)), append(cats, k.category), append(whats, k.what)
		}
	}
	return nil
}

// resultMessages yields the messages of results.
func resultMessages(results []Result) func(yield func(queue.Message) bool) {
	return func(yield func(queue.Message) bool) {
		for i := range results {
			for _, m := range results[i].Messages {
				if !yield(m) {
					return
				}
			}
		}
	}
}

// writeMessages yields the messages w writes.
func (w *writes) writeMessages(yield func(queue.Message) bool) {
	for _, msgs := range w.messages {
		for _, m := range msgs {
			if !yield(m) {
				return
			}
		}
	}
}

// resolveKinds gives w the ids of the kinds of the messages it writes, each log's in its order
// (w.kindSeqs): from the replica's cache, else added or found through q, the transaction's own
// (not cached: not committed yet). One map lookup a message: a claim's batch of LaTeXML logs
// holds some ten thousand messages (docs/performance.md, "Messages").
func (s *Store) resolveKinds(ctx context.Context, q *dbsqlc.Queries, w *writes) error {
	if len(w.messages) == 0 {
		return nil
	}
	missing := false
	for k, msgs := range w.messages {
		seq := make([]int32, len(msgs))
		for i, m := range msgs {
			key := keyOf(m)
			id, ok := w.kindIDs[key]
			if !ok {
				if id, ok = s.kinds.get(key); ok {
					w.kindIDs[key] = id
				} else {
					missing = true
				}
			}
			seq[i] = id
		}
		w.kindSeqs[k] = seq
	}
	if !missing {
		return nil
	}
	if err := s.kindIDs(ctx, q, w.writeMessages, w.kindIDs, false); err != nil {
		return err
	}
	for k, msgs := range w.messages {
		seq := w.kindSeqs[k]
		for i, m := range msgs {
			seq[i] = w.kindIDs[keyOf(m)]
		}
	}
	return nil
}
