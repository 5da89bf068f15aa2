package base_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// The base's one clock is the one its lease stores and rooms read.
func TestOneClock(t *testing.T) {
	pool := queuetest.NewPool(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := queuetest.NewClock(at)
	b := base.New(pool, clock.Now, nil)
	now, err := b.Now(ctx)
	require.NoError(t, err)
	require.True(t, now.Equal(at), "base: %s", now)
	store := b.Lease(lease.Config{Replica: "r"})
	clock.Advance(time.Hour)
	now, err = store.Now(ctx)
	require.NoError(t, err)
	require.True(t, now.Equal(at.Add(time.Hour)), "lease store: %s", now)
	require.Equal(t, "r", store.Config().Replica)

	db := base.New(pool, nil, nil)
	now, err = db.Now(ctx)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), now, time.Minute, "no clock: the database's")
}
