package dispatch

import (
	"sync"
	"time"
)

// testClock is the lease clock of a test: the database's time, moved only when told.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the database clock moved by the offset: zero (the database clock) until time
// is moved.
func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.offset == 0 {
		return time.Time{}
	}
	return time.Now().Add(c.offset)
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}
