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

// kindCacheMax bounds the kinds a replica keeps: past it the cache starts over (a log of made-up
// whats costs a statement per new kind, not memory).
const kindCacheMax = 1 << 16

// maxUsualDetailsBytes bounds the details a kind keeps as its usual ones: a LaTeXML binding's
// path is well within it; longer details (a message's own text, a trace) are seldom repeated.
const maxUsualDetailsBytes = 256

// kindRef is what a replica knows of a row of message_kinds: its id and its usual details
// (migrations/00025_usual_details.sql; "" when it has none).
type kindRef struct {
	id    int32
	usual string
}

// kindCache holds message_kinds rows this replica has seen committed. Rows of message_kinds are
// never deleted or changed, so a row once seen stays right.
type kindCache struct {
	mu   sync.RWMutex
	refs map[kindKey]kindRef
}

func (c *kindCache) get(k kindKey) (kindRef, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ref, ok := c.refs[k]
	return ref, ok
}

func (c *kindCache) put(rows []dbsqlc.MessageKindsEnsureRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == nil || len(c.refs)+len(rows) > kindCacheMax {
		c.refs = make(map[kindKey]kindRef, len(rows))
	}
	for _, r := range rows {
		c.refs[kindKey{queue.Severity(r.Severity), r.Category, r.What}] = kindRef{r.ID, r.UsualDetails}
	}
}

// usualDetails is what a kind first seen in a message with details d keeps as its usual ones.
func usualDetails(d string) string {
	if len(d) > maxUsualDetailsBytes {
		return ""
	}
	return d
}

// kindIDs finds the rows of the kinds of msgs, adding the missing ones to message_kinds through
// q (with the details of the first message of each as their usual ones), into refs. With cache
// set (q is not inside a transaction: what it adds is committed) the rows found go into the
// replica's cache too.
func (s *Store) kindIDs(ctx context.Context, q *dbsqlc.Queries, msgs func(yield func(queue.Message) bool), refs map[kindKey]kindRef, cache bool) error {
	var sevs, cats, whats, usuals []string
	want := map[kindKey]string{}
	for m := range msgs {
		k := keyOf(m)
		if _, ok := refs[k]; ok {
			continue
		}
		if _, ok := want[k]; ok {
			continue
		}
		if ref, ok := s.kinds.get(k); ok {
			refs[k] = ref
			continue
		}
		want[k] = usualDetails(m.Details)
		sevs, cats, whats = append(sevs, string(k.severity)), append(cats, k.category), append(whats, k.what)
		usuals = append(usuals, want[k])
	}
	// A kind another transaction adds at the same time is not in the statement's snapshot: the
	// next statement sees it (or adds it, if that transaction rolled back).
	for try := 0; len(want) > 0; try++ {
		if try == 5 {
			return fmt.Errorf("message kinds: %d still missing after %d tries", len(want), try)
		}
		rows, err := q.MessageKindsEnsure(ctx, sevs, cats, whats, usuals)
		if err != nil {
			return fmt.Errorf("message kinds: %w", err)
		}
		if cache {
			s.kinds.put(rows)
		}
		for _, r := range rows {
			k := kindKey{queue.Severity(r.Severity), r.Category, r.What}
			refs[k] = kindRef{r.ID, r.UsualDetails}
			delete(want, k)
		}
		sevs, cats, whats, usuals = sevs[:0], cats[:0], whats[:0], usuals[:0]
		for k, usual := range want {
			sevs, cats, whats = append(sevs, string(k.severity)), append(cats, k.category), append(whats, k.what)
			usuals = append(usuals, usual)
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
	for _, log := range w.logs {
		for _, m := range log.msgs {
			if !yield(m) {
				return
			}
		}
	}
}

// kindSeq gives the ids of the kinds of msgs, in order, from refs or else the replica's cache
// (adding what it finds there to refs); missing says some were in neither (their ids are 0).
func (s *Store) kindSeq(msgs []queue.Message, refs map[kindKey]kindRef) (seq []int32, missing bool) {
	if len(msgs) == 0 {
		return nil, false
	}
	seq = make([]int32, len(msgs))
	for i, m := range msgs {
		key := keyOf(m)
		ref, ok := refs[key]
		if !ok {
			if ref, ok = s.kinds.get(key); ok {
				refs[key] = ref
			} else {
				missing = true
			}
		}
		seq[i] = ref.id
	}
	return seq, missing
}

// resultKinds gives each result the ids of its messages' kinds in order (Result.kinds), adding
// the kinds not seen yet to message_kinds and the replica's cache, committed, before the claim's
// transaction, which then writes ids it knows; refs gets the rows. One map lookup a message: a
// claim's batch of LaTeXML logs holds some ten thousand (docs/performance.md, "Messages").
func (s *Store) resultKinds(ctx context.Context, results []Result, refs map[kindKey]kindRef) error {
	missing := false
	for i := range results {
		var m bool
		results[i].kinds, m = s.kindSeq(results[i].Messages, refs)
		missing = missing || m
	}
	if !missing {
		return nil
	}
	if err := s.kindIDs(ctx, dbsqlc.New(s.pool), resultMessages(results), refs, true); err != nil {
		return err
	}
	for i := range results {
		results[i].kinds, _ = s.kindSeq(results[i].Messages, refs) // every kind in refs now
	}
	return nil
}

// resolveKinds gives the logs w writes that came without them (a claim's come with theirs,
// resultKinds) the ids of their messages' kinds, and w each kind's usual details (w.usual):
// from w.kindRefs or the replica's cache, else added or found through q, the transaction's own
// (not cached: not committed yet).
func (s *Store) resolveKinds(ctx context.Context, q *dbsqlc.Queries, w *writes) error {
	if len(w.logs) == 0 {
		return nil
	}
	var missing []*messageLog
	for _, log := range w.logs {
		if log.resolved() {
			continue
		}
		var m bool
		if log.kinds, m = s.kindSeq(log.msgs, w.kindRefs); m {
			missing = append(missing, log)
		}
	}
	if len(missing) > 0 {
		if err := s.kindIDs(ctx, q, w.writeMessages, w.kindRefs, false); err != nil {
			return err
		}
		for _, log := range missing {
			log.kinds, _ = s.kindSeq(log.msgs, w.kindRefs) // every kind in w.kindRefs now
		}
	}
	for _, ref := range w.kindRefs {
		if ref.usual != "" {
			w.usual[ref.id] = ref.usual
		}
	}
	return nil
}
