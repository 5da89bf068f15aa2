package web

import (
	"context"
	"sync"
	"time"
)

// syncBelow is how quick a figure that background keeps must be to be read on each load: figures
// of a small farm stay exact, those of millions of attempts are read in the background.
const syncBelow = 50 * time.Millisecond

// background keeps a figure too dear to read on each page load (the overview's figures of the
// attempts trail, the workers' outcomes over it, the dead letters). Read in under syncBelow, it
// is read on each load, unless always is set. Dearer, only the first call waits for it; later
// ones get the last one read while, once it is older than Server.readEvery allows, one read in
// the background replaces it.
type background[T any] struct {
	what   string // names the figure in the log
	read   func(context.Context) (T, error)
	always bool // read in the background however quick: the overview's trail, polled live

	mu   sync.Mutex
	at   time.Time // when the figure was read
	cost time.Duration
	busy bool
	data T
}

// forget drops the figure (an action changed it): the next call reads it again and waits.
func (c *background[T]) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = time.Time{}
}

// get returns the figure and when it was read.
func (c *background[T]) get(ctx context.Context, s *Server) (T, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || (!c.always && c.cost < syncBelow) {
		start := time.Now()
		d, err := c.read(ctx)
		if err != nil {
			return d, time.Time{}, err
		}
		c.data, c.at, c.cost = d, time.Now(), time.Since(start)
		return d, c.at, nil
	}
	if !c.busy && time.Since(c.at) >= s.readEvery(trailEvery, c.cost) {
		c.busy = true
		go c.refresh(s)
	}
	return c.data, c.at, nil
}

func (c *background[T]) refresh(s *Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	d, err := c.read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	if err != nil {
		s.logger.Error("reading in the background", "figure", c.what, "error", err)
		c.at = time.Now() // try again after the same wait
		return
	}
	c.data, c.at, c.cost = d, time.Now(), time.Since(start)
}

// readEvery is how long a figure that took cost to read serves before it is read again: at
// least least, and long enough that reading it takes at most half of LiveBudget of the
// database's time (LiveBudget is a share of a second: 5 ms a second by default).
func (s *Server) readEvery(least, cost time.Duration) time.Duration {
	return max(least, time.Duration(float64(cost)*float64(time.Second)/(float64(s.cfg.LiveBudget)/2)))
}
