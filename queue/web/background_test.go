package web

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackgroundReadsDearFiguresOnce: a figure read quickly is read on each load; a dear one
// (the workers' outcomes over millions of attempts) only on the first, then served as read.
func TestBackgroundReadsDearFiguresOnce(t *testing.T) {
	s := &Server{cfg: Config{LiveBudget: 5 * time.Millisecond}, logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	var cheapReads, dearReads atomic.Int64
	cheap := &background[int64]{what: "cheap", read: func(context.Context) (int64, error) { return cheapReads.Add(1), nil }}
	dear := &background[int64]{what: "dear", read: func(context.Context) (int64, error) {
		time.Sleep(2 * syncBelow)
		return dearReads.Add(1), nil
	}}
	for i := range 3 {
		n, at, err := cheap.get(ctx, s)
		require.NoError(t, err)
		require.Equal(t, int64(i+1), n, "a cheap figure is read on each load")
		require.WithinDuration(t, time.Now(), at, time.Second)
		n, _, err = dear.get(ctx, s)
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "a dear figure is read once, then served")
	}
	require.Equal(t, int64(1), dearReads.Load(), "no refresh before trailEvery")
	require.Empty(t, ageOf(time.Now(), time.Now()))
	require.Equal(t, "3s", ageOf(time.Now().Add(-3*time.Second), time.Now()))
}
