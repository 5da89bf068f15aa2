package lease

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// cursorRestart is how often a service's TODO scans start again from the lowest id, so a task
// made TODO below a cursor (a rerun, another replica's returned lease) waits at most this long
// while there is work above it. With none above it, the lease scans from the lowest id at once.
const cursorRestart = time.Second

// cursors are this store's memory of what it reserved fresh, per service and corpus: the
// highest task id (the cursor), and the fair share's pass (docs/semantics.md#fair-share).
//
// A TODO task's index entry stays in tasks_todo after its lease (until vacuum), so a scan from
// the lowest id walks past every task leased since the last vacuum; starting past the last
// lease does not.
//
// The pass of a corpus is the share key of the last task reserved from it: its k-th next task
// has the key pass + k / weight, and a reservation takes the lowest keys of the corpora of the
// highest priority, so each corpus gets a share of this store's reservations in proportion to
// its weight, whatever its backlog. vtime is the highest key reserved so far. A corpus this
// store has not served, or whose pass lags more than one stride behind vtime (it had no TODO
// task, or another priority was served), starts one stride before vtime: it neither waits
// behind corpora that were served meanwhile nor catches up on what it did not ask for. The
// state is this replica's alone and needs no recovery: after a restart every corpus starts
// level, and several replicas each serving by weight serve by weight together.
type cursors struct {
	mu sync.Mutex
	m  map[int32]*serviceCursor
}

type serviceCursor struct {
	since   time.Time // when the scans last started from the lowest id
	vtime   float64
	corpora map[int32]*corpusCursor
}

type corpusCursor struct {
	after int64
	pass  float64
}

// shareState is a service's cursors and passes, as the reservation statements take them.
type shareState struct {
	corpora []int32
	passes  []float64
	after   []int64
	vtime   float64
}

func (c *cursors) service(service int32) *serviceCursor {
	if c.m == nil {
		c.m = map[int32]*serviceCursor{}
	}
	sc := c.m[service]
	if sc == nil {
		sc = &serviceCursor{corpora: map[int32]*corpusCursor{}}
		c.m[service] = sc
	}
	return sc
}

// start returns the state the service's next TODO scan starts from. With fromLowest, or when
// the scans last started from the lowest id a cursorRestart ago, every cursor is 0.
func (c *cursors) start(service int32, fromLowest bool) shareState {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.service(service)
	if time.Since(sc.since) >= cursorRestart {
		sc.since = time.Now()
		for _, cc := range sc.corpora {
			cc.after = 0
		}
	}
	st := shareState{vtime: sc.vtime}
	for _, id := range slices.Sorted(maps.Keys(sc.corpora)) {
		cc := sc.corpora[id]
		after := cc.after
		if fromLowest {
			after = 0
		}
		st.corpora, st.passes, st.after = append(st.corpora, id), append(st.passes, cc.pass), append(st.after, after)
	}
	return st
}

// advance records a task reserved fresh: its corpus's cursor moves up to id, its pass and vtime
// up to key.
func (c *cursors) advance(service, corpus int32, id int64, key float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.service(service)
	cc := sc.corpora[corpus]
	if cc == nil {
		cc = &corpusCursor{pass: key}
		sc.corpora[corpus] = cc
	}
	cc.after, cc.pass = max(cc.after, id), max(cc.pass, key)
	sc.vtime = max(sc.vtime, key)
}

// reset makes every service's next scan start from the lowest id; the passes stay.
func (c *cursors) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sc := range c.m {
		sc.since = time.Time{}
	}
}
