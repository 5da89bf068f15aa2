package reaper

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cortexq/cortexq/queue/lease"
)

// dbClock is River's clock: the replica's local clock corrected to the database's. River stamps
// some local readings into the database — a periodic job's scheduled_at, the rescuer's and
// cleaner's horizons — and fetches jobs by the database's now(), so on a replica whose clock ran
// an hour ahead the reap jobs its leader enqueued would wait an hour before anyone worked them.
// Corrected, every replica schedules by the database clock. NowOrNil is nil, so River's own
// queries keep using now().
type dbClock struct {
	local  func() time.Time
	offset atomic.Int64 // database clock minus local clock, in nanoseconds
	store  *lease.Store
	logger *slog.Logger

	mu       sync.Mutex
	reported time.Duration // offset last logged
}

// clockOffsetNoted is how far the local clock may be off the database's before it is logged.
const clockOffsetNoted = time.Second

func newDBClock(store *lease.Store, local func() time.Time, logger *slog.Logger) *dbClock {
	if local == nil {
		local = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &dbClock{local: local, store: store, logger: logger}
}

// Now returns the local clock's reading moved by the last measured offset. It keeps the
// monotonic reading, so River's durations are unaffected.
func (c *dbClock) Now() time.Time { return c.local().Add(time.Duration(c.offset.Load())) }

// NowOrNil is nil: the time is not stubbed, and River's queries use the database's now().
func (c *dbClock) NowOrNil() *time.Time { return nil }

// sync measures the offset of the local clock against the database's, halfway through the round
// trip, and logs it when it moved more than clockOffsetNoted from the offset last logged (zero at
// first).
func (c *dbClock) sync(ctx context.Context) error {
	before := c.local()
	db, err := c.store.DatabaseNow(ctx)
	if err != nil {
		return err
	}
	rtt := c.local().Sub(before)
	offset := db.Sub(before.Add(rtt / 2))
	c.offset.Store(int64(offset))

	c.mu.Lock()
	defer c.mu.Unlock()
	if (offset - c.reported).Abs() > clockOffsetNoted {
		c.logger.Warn("the local clock differs from the database clock; leases and River's schedule follow the database",
			"offset", offset.Round(time.Millisecond), "round_trip", rtt.Round(time.Microsecond))
		c.reported = offset
	}
	return nil
}
