package lease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/testfactory"
)

// Three days of a replica's life, a day at a time: a reaper pass every 10 s, and a worker fleet
// of 20 restarting every 10 minutes under new names. A prune at the end of each day, keeping a
// day, leaves at most a day of passes and of workers, however many days went by.
func TestPruneTablesBoundsPassesAndWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	svc := testfactory.Service(ctx, t, pool, nil)
	start := testfactory.DBNow(ctx, t, pool).Add(-3 * 24 * time.Hour)
	clock := queuetest.NewClock(start)
	store := New(pool, Config{Replica: "r1", NowFunc: clock.Now})
	keep := TablesRetention{ReaperPasses: 24 * time.Hour, Workers: 24 * time.Hour}
	const passesADay, restartsADay, fleet = 8640, 144, 20
	for day := range 3 {
		from := start.Add(time.Duration(day) * 24 * time.Hour)
		_, err := pool.Exec(ctx, `INSERT INTO reaper_passes (replica, at, requeued, dead_lettered, forgotten)
			SELECT 'r1', $1::timestamptz + g * interval '10 seconds', 0, 0, 0 FROM generate_series(0, $2 - 1) g`, from, passesADay)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO workers (name, service_id, first_seen, last_request, last_result)
			SELECT format('host%s-pid%s-%s', w, r, $4::int), $1, at, at + interval '9 minutes', at + interval '9 minutes'
			FROM generate_series(0, $2 - 1) r, generate_series(1, $3) w,
			     LATERAL (SELECT $5::timestamptz + r * interval '10 minutes' AS at) x`, svc.ID, restartsADay, fleet, day, from)
		require.NoError(t, err)
		clock.Advance(24 * time.Hour)
		sum, err := store.PruneTables(ctx, keep)
		require.NoError(t, err)
		if day > 0 {
			require.Positive(t, sum.ReaperPasses, "day %d", day)
			require.Positive(t, sum.Workers, "day %d", day)
		}
		require.LessOrEqual(t, sum.ReaperPassesLeft, int64(passesADay+1), "day %d", day)
		require.LessOrEqual(t, sum.WorkersLeft, int64(restartsADay*fleet), "day %d", day)
		var passes, workers int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM reaper_passes), (SELECT count(*) FROM workers)`).Scan(&passes, &workers))
		require.Equal(t, sum.ReaperPassesLeft, passes)
		require.Equal(t, sum.WorkersLeft, workers)
	}
	// A week of retention off: nothing goes; the last pass is never pruned.
	sum, err := store.PruneTables(ctx, TablesRetention{})
	require.NoError(t, err)
	require.Zero(t, sum.ReaperPasses+sum.Workers)
	clock.Advance(30 * 24 * time.Hour)
	sum, err = store.PruneTables(ctx, keep)
	require.NoError(t, err)
	require.Equal(t, int64(1), sum.ReaperPassesLeft, "the last pass stays")
	require.Zero(t, sum.WorkersLeft)
}
