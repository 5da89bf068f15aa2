package reaper

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// TestDBClockFollowsTheDatabase checks that River's clock on a replica whose local clock is off
// by an hour, either way, reads the database's time once synced.
func TestDBClockFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	store := lease.New(queuetest.NewPool(t), lease.Config{Replica: "skewed"})
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		c := newDBClock(store, func() time.Time { return time.Now().Add(skew) }, nil)
		require.InDelta(t, skew.Seconds(), time.Until(c.Now()).Seconds(), 1, "before the first sync: the local clock")
		require.NoError(t, c.sync(context.Background()))
		db, err := store.DatabaseNow(context.Background())
		require.NoError(t, err)
		require.InDelta(t, 0, c.Now().Sub(db).Seconds(), 1, "after a sync: the database clock")
		require.Nil(t, c.NowOrNil(), "River's queries keep the database's now()")
	}
}
