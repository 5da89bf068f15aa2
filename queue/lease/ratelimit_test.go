package lease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/wire"
)

// TestRateLimitedLog ports the reference's discard-log rule; the limiter lives in queue/wire,
// where the ventilator and the sink use it.
func TestRateLimitedLog(t *testing.T) {
	t.Run("EmitsFirstThenThrottlesThenSummarizes", func(t *testing.T) {
		now := time.Unix(1_700_000_000, 0)
		l := &wire.RateLimiter{Interval: 40 * time.Millisecond, NowFunc: func() time.Time { return now }}
		n, emit := l.Record()
		require.True(t, emit, "the first event always emits")
		require.Equal(t, uint64(1), n)
		_, emit = l.Record()
		require.False(t, emit, "suppressed within the interval")
		_, emit = l.Record()
		require.False(t, emit)
		now = now.Add(50 * time.Millisecond)
		n, emit = l.Record()
		require.True(t, emit, "after the interval a summary emits")
		require.Equal(t, uint64(3), n, "carrying the suppressed count")
		_, emit = l.Record()
		require.False(t, emit, "and the counter starts again")
	})
}
