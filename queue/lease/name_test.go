package lease

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A replica's name is held by one store at a time: a second is refused with the holder named,
// gets it once the first lets go, and a hold whose session is ended (a database restart, an
// operator's pg_terminate_backend) takes the name again on a new one.
func TestHoldNameOneProcessAName(t *testing.T) {
	f := newFixture(t)
	first, err := f.store.HoldName(f.ctx, true)
	require.NoError(t, err)

	other := New(f.pool, Config{Replica: "r1"})
	_, err = other.HoldName(f.ctx, true)
	var held *NameHeldError
	require.True(t, errors.As(err, &held), "refused: %v", err)
	require.Positive(t, held.PID)
	require.True(t, strings.HasPrefix(held.Holder, "cortexq replica r1 host "), held.Holder)
	require.Contains(t, err.Error(), "pg_terminate_backend(")

	another, err := New(f.pool, Config{Replica: "r2"}).HoldName(f.ctx, true)
	require.NoError(t, err, "another name is free")
	another.Release()

	// The session ends under the hold: it takes the name again.
	_, err = f.pool.Exec(f.ctx, "SELECT pg_terminate_backend($1)", held.PID)
	require.NoError(t, err)
	ended := held.PID
	require.Eventually(t, func() bool {
		h, err := other.HoldName(f.ctx, true)
		if err == nil { // between the end and the new session: let go again
			h.Release()
			return false
		}
		return errors.As(err, &held) && held.PID != ended
	}, 4*HeartbeatEvery, time.Second, "the first hold took the name again on a new session")

	first.Release()
	second, err := other.HoldName(f.ctx, true)
	require.NoError(t, err, "free once released")
	second.Release()
}

// A restarted replica gives back at once the stock its killed process held (ReleaseEarlier):
// those tasks are TODO again with no attempt counted; another replica's stock stays.
func TestReleaseEarlierGivesBackADeadProcesssStock(t *testing.T) {
	f := newFixture(t)
	for range 6 {
		f.task()
	}
	dead := f.reserve(f.store, 4)
	require.Len(t, dead, 4)
	other := New(f.pool, Config{Replica: "r2", LeaseTimeout: testLease, NowFunc: f.clock.Now})
	require.Len(t, f.reserve(other, 2), 2)

	restarted := New(f.pool, Config{Replica: "r1", LeaseTimeout: testLease, NowFunc: f.clock.Now})
	n, err := restarted.ReleaseEarlier(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	var todo, reservedR1, reservedR2 int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT
		(SELECT count(*) FROM tasks WHERE status = 0),
		(SELECT count(*) FROM dispatch WHERE replica = 'r1'),
		(SELECT count(*) FROM dispatch WHERE replica = 'r2' AND state = 'reserved')`).Scan(&todo, &reservedR1, &reservedR2))
	require.Equal(t, []int{4, 0, 2}, []int{todo, reservedR1, reservedR2})
	for _, r := range dead {
		require.Zero(t, f.attempts(r.TaskID))
	}
	f.sound()
	n, err = restarted.ReleaseEarlier(f.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to give back")
}
