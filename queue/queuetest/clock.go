package queuetest

import (
	"sync"
	"time"
)

// Clock is a test clock standing in for the database clock (lease.Config.NowFunc): it starts
// where NewClock puts it and moves only by Advance. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
