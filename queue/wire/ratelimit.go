package wire

import (
	"sync"
	"time"
)

// DefaultLogInterval is the least time between two lines of a rate-limited log.
const DefaultLogInterval = 5 * time.Second

// RateLimiter thins out a log of repeated events: the first event is logged at once, later ones
// at most once per Interval, each such line carrying how many events it stands for. The zero
// value is ready to use with DefaultLogInterval; it is safe for concurrent use. Set the fields
// before the first Record.
type RateLimiter struct {
	// Interval is the least time between two emitted events; 0 means DefaultLogInterval.
	Interval time.Duration
	// NowFunc is the clock; nil means time.Now.
	NowFunc func() time.Time

	mu      sync.Mutex
	started bool
	last    time.Time
	pending uint64
}

// NewRateLimiter returns a RateLimiter with the given interval (0 means DefaultLogInterval).
func NewRateLimiter(interval time.Duration) *RateLimiter {
	return &RateLimiter{Interval: interval}
}

// Record counts one event and reports whether to log it now. When emit is true, n is the
// number of events the line stands for: this one plus those held back since the last emitted
// line (1 for the first event). When emit is false, n is the number held back so far,
// this one included.
func (l *RateLimiter) Record() (n uint64, emit bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending++
	if l.started && now.Sub(l.last) < l.interval() {
		return l.pending, false
	}
	l.started = true
	l.last = now
	n, l.pending = l.pending, 0
	return n, true
}

// Flush returns the number of events held back since the last emitted line and forgets them,
// for a final summary line at shutdown.
func (l *RateLimiter) Flush() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.pending
	l.pending = 0
	return n
}

func (l *RateLimiter) interval() time.Duration {
	if l.Interval <= 0 {
		return DefaultLogInterval
	}
	return l.Interval
}

func (l *RateLimiter) now() time.Time {
	if l.NowFunc != nil {
		return l.NowFunc()
	}
	return time.Now()
}
