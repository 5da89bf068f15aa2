package reports

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// The rollups' levels (the SQL functions rollup_messaged, rollup_category, rollup_what and
// rollup_status of migrations/00017_status_severity.sql; a test checks they agree).
const (
	levelMessaged int16 = 0
	levelCategory int16 = 1
	levelWhat     int16 = 2
	levelStatus   int16 = 3
)

// kindName is a message_kinds row's (severity, category, what).
type kindName struct {
	severity, category, what string
}

// nameCache caches message_kinds names by id for the fold. Rows of message_kinds are never
// changed or deleted, so a name once read stays right.
type nameCache struct {
	mu    sync.Mutex
	names map[int32]kindName
}

// nameCacheMax bounds nameCache: past it, it starts over.
const nameCacheMax = 1 << 16

// lookup fills names with the names of ids, reading the ones it lacks through q.
func (c *nameCache) lookup(ctx context.Context, q *dbsqlc.Queries, ids map[int32]kindName) error {
	var missing []int32
	c.mu.Lock()
	for id := range ids {
		if n, ok := c.names[id]; ok {
			ids[id] = n
		} else {
			missing = append(missing, id)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	rows, err := q.ReportKindNames(ctx, missing)
	if err != nil {
		return fmt.Errorf("message kinds: %w", err)
	}
	if len(rows) != len(missing) {
		return fmt.Errorf("message kinds: %d of %d ids are not in message_kinds", len(missing)-len(rows), len(missing))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil || len(c.names)+len(rows) > nameCacheMax {
		c.names = make(map[int32]kindName, len(rows))
	}
	for _, r := range rows {
		n := kindName{r.Severity, r.Category, r.What}
		c.names[r.ID] = n
		ids[r.ID] = n
	}
	return nil
}

// rollupKey is a row of report_rollup; allKey one of report_all_rollup.
type rollupKey struct {
	corpus, service int32
	status, level   int16
	category, what  string
}

type allKey struct {
	corpus, service          int32
	level                    int16
	severity, category, what string
}

// rollupChange is a rollup row's change: tasks and messages.
type rollupChange struct{ tasks, messages int64 }

// contribution is what one task adds to the rollups, as report_folded keeps it: its scope and
// final status and the kinds of its log (ascending ids) with their messages.
type contribution struct {
	corpus, service int32
	status          int16
	kinds, counts   []int32
}

// foldDelta is the change a batch makes to both rollups.
type foldDelta struct {
	rollup map[rollupKey]rollupChange
	all    map[allKey]rollupChange
	// scratch for add
	own    []int
	perCat map[sevCat]int64
	perSev map[string]int64
}

type sevCat struct{ severity, category string }

func newFoldDelta() *foldDelta {
	return &foldDelta{rollup: map[rollupKey]rollupChange{}, all: map[allKey]rollupChange{},
		perCat: map[sevCat]int64{}, perSev: map[string]int64{}}
}

// add adds c's contribution to d, times sign (+1 added, -1 taken back).
func (d *foldDelta) add(c *contribution, sign int64, names map[int32]kindName) {
	bump := func(k rollupKey, n int64) {
		v := d.rollup[k]
		d.rollup[k] = rollupChange{v.tasks + sign, v.messages + sign*n}
	}
	// The status's severity (report_rollup): its kinds of that severity, by (category, what),
	// per category, and the task as messaged; a Fatal task counted whatever its messages.
	sev, _ := queue.StatusSeverity(queue.Status(c.status))
	d.own = d.own[:0]
	for i, id := range c.kinds {
		if names[id].severity == string(sev) {
			d.own = append(d.own, i)
		}
	}
	slices.SortFunc(d.own, func(a, b int) int {
		na, nb := names[c.kinds[a]], names[c.kinds[b]]
		return cmp.Or(cmp.Compare(na.category, nb.category), cmp.Compare(na.what, nb.what))
	})
	var total, catTotal int64
	for k, i := range d.own {
		nm, n := names[c.kinds[i]], int64(c.counts[i])
		bump(rollupKey{c.corpus, c.service, c.status, levelWhat, nm.category, nm.what}, n)
		total, catTotal = total+n, catTotal+n
		if k == len(d.own)-1 || names[c.kinds[d.own[k+1]]].category != nm.category {
			bump(rollupKey{c.corpus, c.service, c.status, levelCategory, nm.category, ""}, catTotal)
			catTotal = 0
		}
	}
	if len(d.own) > 0 {
		bump(rollupKey{c.corpus, c.service, c.status, levelMessaged, "", ""}, total)
	}
	if queue.Status(c.status) == queue.StatusFatal {
		bump(rollupKey{c.corpus, c.service, c.status, levelStatus, "", ""}, 0)
	}
	// Every severity (report_all_rollup): per kind, per (severity, category) and per severity.
	ball := func(k allKey, n int64) {
		v := d.all[k]
		d.all[k] = rollupChange{v.tasks + sign, v.messages + sign*n}
	}
	clear(d.perCat)
	clear(d.perSev)
	for i, id := range c.kinds {
		nm, n := names[id], int64(c.counts[i])
		ball(allKey{c.corpus, c.service, levelWhat, nm.severity, nm.category, nm.what}, n)
		d.perCat[sevCat{nm.severity, nm.category}] += n
		d.perSev[nm.severity] += n
	}
	for k, n := range d.perCat {
		ball(allKey{c.corpus, c.service, levelCategory, k.severity, k.category, ""}, n)
	}
	for s, n := range d.perSev {
		ball(allKey{c.corpus, c.service, levelMessaged, s, "", ""}, n)
	}
}

// current is the contribution of a task of final status st whose log's kinds are logKinds (in
// log order), and whether it contributes anything (a task with no message contributes only if
// it is Fatal).
func current(corpus, service int32, st int16, logKinds []int32) (contribution, bool) {
	c := contribution{corpus: corpus, service: service, status: st}
	if len(logKinds) == 0 && queue.Status(st) != queue.StatusFatal {
		return c, false
	}
	sorted := slices.Clone(logKinds)
	slices.Sort(sorted)
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		c.kinds, c.counts = append(c.kinds, sorted[i]), append(c.counts, int32(j-i))
		i = j
	}
	return c, true
}

// foldBatch folds one batch of noted changes in the caller's transaction (which holds the
// fold's lock): it takes up to batch task ids from report_changes with what each contributed
// when last folded and what it is now (ReportFoldTake), works out the change to both rollups
// here, and writes it with report_folded's new rows. It returns the notes taken and the
// distinct task ids (for DiffFold). The arithmetic is the replica's, not PostgreSQL's: done in
// SQL, grouping a LaTeXML-like log's hundred messages by kind and the kinds by name cost the
// machine more a task than here (docs/performance.md#messages).
func (s *Store) foldBatch(ctx context.Context, q *dbsqlc.Queries, batch int) (changes int64, ids []int64, err error) {
	rows, err := q.ReportFoldTake(ctx, int32(batch))
	if err != nil || len(rows) == 0 {
		return 0, nil, err
	}
	changes = rows[0].Changes
	// Each task's contribution now (ok: it has one), then the names of every kind met, distinct
	// kinds only: a log's hundred messages are some forty kinds.
	type now struct {
		c  contribution
		ok bool
	}
	cur := make([]now, len(rows))
	names := map[int32]kindName{}
	for i := range rows {
		r := &rows[i]
		if r.Status != 0 {
			cur[i].c, cur[i].ok = current(r.CorpusID, r.ServiceID, r.Status, r.Kinds)
		}
		for _, kinds := range [][]int32{r.OldKinds, cur[i].c.kinds} {
			for _, id := range kinds {
				names[id] = kindName{}
			}
		}
	}
	if err := s.names.lookup(ctx, q, names); err != nil {
		return 0, nil, err
	}
	d := newFoldDelta()
	var put dbsqlc.ReportFoldPutParams
	var text []byte
	var gone []int64
	for i := range rows {
		r := &rows[i]
		ids = append(ids, r.TaskID)
		if r.OldStatus != 0 {
			old := contribution{corpus: r.OldCorpusID, service: r.OldServiceID, status: r.OldStatus, kinds: r.OldKinds, counts: r.OldCounts}
			d.add(&old, -1, names)
		}
		c, ok := cur[i].c, cur[i].ok
		if !ok {
			if r.OldStatus != 0 {
				gone = append(gone, r.TaskID)
			}
			continue
		}
		d.add(&c, 1, names)
		put.TaskIds = append(put.TaskIds, r.TaskID)
		put.CorpusIds, put.ServiceIds, put.Statuses = append(put.CorpusIds, c.corpus), append(put.ServiceIds, c.service), append(put.Statuses, c.status)
		text = appendIntArray(text[:0], c.kinds)
		put.Kinds = append(put.Kinds, string(text))
		text = appendIntArray(text[:0], c.counts)
		put.Counts = append(put.Counts, string(text))
	}
	if len(gone) > 0 {
		if err := q.ReportFoldGone(ctx, gone); err != nil {
			return 0, nil, err
		}
	}
	if len(put.TaskIds) > 0 {
		if err := q.ReportFoldPut(ctx, put); err != nil {
			return 0, nil, err
		}
	}
	if err := d.write(ctx, q); err != nil {
		return 0, nil, err
	}
	return changes, ids, nil
}

// appendIntArray appends PostgreSQL's text form of the integer array a ({1,2,3}) to b.
func appendIntArray(b []byte, a []int32) []byte {
	b = append(b, '{')
	for i, n := range a {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return append(b, '}')
}

// changed returns the keys of m's nonzero changes, sorted by order.
func changed[K comparable](m map[K]rollupChange, order func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k, v := range m {
		if v != (rollupChange{}) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, order)
	return keys
}

// takes says whether a change takes away: only such a change can bring a row to zero (counts
// are never negative).
func (c rollupChange) takes() bool { return c.tasks < 0 || c.messages < 0 }

// write adds d's nonzero changes to the rollups, in key order, and drops the rows they brought
// to zero.
func (d *foldDelta) write(ctx context.Context, q *dbsqlc.Queries) error {
	var p dbsqlc.ReportRollupAddParams
	var z dbsqlc.ReportRollupDropZeroParams
	for _, k := range changed(d.rollup, func(a, b rollupKey) int {
		return cmp.Or(cmp.Compare(a.corpus, b.corpus), cmp.Compare(a.service, b.service), cmp.Compare(a.status, b.status),
			cmp.Compare(a.level, b.level), cmp.Compare(a.category, b.category), cmp.Compare(a.what, b.what))
	}) {
		v := d.rollup[k]
		p.CorpusIds, p.ServiceIds, p.Statuses, p.Levels = append(p.CorpusIds, k.corpus), append(p.ServiceIds, k.service), append(p.Statuses, k.status), append(p.Levels, k.level)
		p.Categories, p.Whats, p.Tasks, p.Messages = append(p.Categories, k.category), append(p.Whats, k.what), append(p.Tasks, v.tasks), append(p.Messages, v.messages)
		if v.takes() {
			z.CorpusIds, z.ServiceIds, z.Statuses, z.Levels = append(z.CorpusIds, k.corpus), append(z.ServiceIds, k.service), append(z.Statuses, k.status), append(z.Levels, k.level)
			z.Categories, z.Whats = append(z.Categories, k.category), append(z.Whats, k.what)
		}
	}
	var ap dbsqlc.ReportAllRollupAddParams
	var az dbsqlc.ReportAllRollupDropZeroParams
	for _, k := range changed(d.all, func(a, b allKey) int {
		return cmp.Or(cmp.Compare(a.corpus, b.corpus), cmp.Compare(a.service, b.service), cmp.Compare(a.level, b.level),
			cmp.Compare(a.severity, b.severity), cmp.Compare(a.category, b.category), cmp.Compare(a.what, b.what))
	}) {
		v := d.all[k]
		ap.CorpusIds, ap.ServiceIds, ap.Severities, ap.Levels = append(ap.CorpusIds, k.corpus), append(ap.ServiceIds, k.service), append(ap.Severities, k.severity), append(ap.Levels, k.level)
		ap.Categories, ap.Whats, ap.Tasks, ap.Messages = append(ap.Categories, k.category), append(ap.Whats, k.what), append(ap.Tasks, v.tasks), append(ap.Messages, v.messages)
		if v.takes() {
			az.CorpusIds, az.ServiceIds, az.Severities, az.Levels = append(az.CorpusIds, k.corpus), append(az.ServiceIds, k.service), append(az.Severities, k.severity), append(az.Levels, k.level)
			az.Categories, az.Whats = append(az.Categories, k.category), append(az.Whats, k.what)
		}
	}
	// Each statement only when it has rows: most batches of first results take nothing away.
	steps := []struct {
		rows int
		run  func() error
	}{
		{len(p.CorpusIds), func() error { return q.ReportRollupAdd(ctx, p) }},
		{len(z.CorpusIds), func() error { return q.ReportRollupDropZero(ctx, z) }},
		{len(ap.CorpusIds), func() error { return q.ReportAllRollupAdd(ctx, ap) }},
		{len(az.CorpusIds), func() error { return q.ReportAllRollupDropZero(ctx, az) }},
	}
	for _, st := range steps {
		if st.rows == 0 {
			continue
		}
		if err := st.run(); err != nil {
			return err
		}
	}
	return nil
}
