package lease

import (
	"sync"
	"time"
)

// cursorRestart is how often a service's TODO scan starts again from the lowest id, so a task
// made TODO below the cursor (a rerun, another replica's returned lease) waits at most this long
// while there is work above it. With none above it, the lease scans from the lowest id at once.
const cursorRestart = time.Second

// cursors remember, per service, the highest task id this store leased fresh. A TODO task's
// index entry stays in tasks_todo after its lease (until vacuum), so a scan from the lowest id
// walks past every task leased since the last vacuum; starting past the last lease does not.
type cursors struct {
	mu sync.Mutex
	m  map[int32]cursor
}

type cursor struct {
	after int64
	since time.Time // when the scan last started from the lowest id
}

// start returns the id the service's next TODO scan starts after.
func (c *cursors) start(service int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.m[service]
	if time.Since(cur.since) >= cursorRestart {
		cur = cursor{since: time.Now()}
		if c.m == nil {
			c.m = map[int32]cursor{}
		}
		c.m[service] = cur
	}
	return cur.after
}

// advance moves the service's cursor up to id, the highest task it just leased.
func (c *cursors) advance(service int32, id int64) {
	if id <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[int32]cursor{}
	}
	cur := c.m[service]
	cur.after = max(cur.after, id)
	c.m[service] = cur
}

// reset makes every service's next scan start from the lowest id.
func (c *cursors) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}
