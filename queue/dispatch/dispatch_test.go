package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDispatch(t *testing.T) {
	t.Run("EightEchoWorkersConvertTwoHundredTasks", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(200, 150_000) // two chunks and a bit each
		stats, stop := e.workers(8)
		e.waitTerminal(60*time.Second, false)
		stop()
		e.requireEchoed(ids)
		require.Equal(t, uint64(200), stats.Tasks.Load(), "each task converted once")
		var attempts int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(DISTINCT worker) FROM attempts`).Scan(&attempts))
		require.Equal(t, 8, attempts, "eight distinct identities worked")
	})
}
