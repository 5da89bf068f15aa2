package lease

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// TestDeletingATaskDeletesItsRows: with no foreign keys on the hot tables, the tasks_deleted
// trigger deletes a deleted task's dispatch rows, attempts and messages (and only its), and the
// RowHasTask invariant reports a dispatch row whose task is gone.
func TestDeletingATaskDeletesItsRows(t *testing.T) {
	f := newFixture(t)
	inFlight := f.leasedNowTo("w1")
	finished := f.leasedNowTo("w2")
	f.accepted(finished, "w2", queue.StatusWarning)
	kept := f.leasedNowTo("w3")
	f.accepted(kept, "w3", queue.StatusWarning)

	rowsOf := func(id int64) (n int) {
		t.Helper()
		require.NoError(t, f.pool.QueryRow(f.ctx, `
			SELECT (SELECT count(*) FROM dispatch WHERE task_id = $1)
			     + (SELECT count(*) FROM attempts WHERE task_id = $1)
			     + (SELECT count(*) FROM task_messages WHERE task_id = $1)`, id).Scan(&n))
		return n
	}
	require.Equal(t, 2, rowsOf(inFlight), "a dispatch row and an attempt")
	require.Equal(t, 2, rowsOf(finished), "an attempt and a message")
	before := rowsOf(kept)

	tag, err := f.pool.Exec(f.ctx, `DELETE FROM tasks WHERE id = ANY($1)`, []int64{inFlight, finished})
	require.NoError(t, err)
	require.EqualValues(t, 2, tag.RowsAffected())
	require.Zero(t, rowsOf(inFlight))
	require.Zero(t, rowsOf(finished))
	require.Equal(t, before, rowsOf(kept), "another task's rows stay")
	vs, err := f.store.CheckInvariants(f.ctx)
	require.NoError(t, err)
	require.Empty(t, vs)

	// A row written for a task that does not exist (no key refuses it) is reported.
	_, err = f.pool.Exec(f.ctx, `
		INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, replica, service_id,
		                      lease_timeout_seconds, leased_at)
		VALUES ($1, 1, 'in_flight', '{w9}', now(), 'r1', $2, 60, now())`, inFlight, f.svc)
	require.NoError(t, err)
	vs, err = f.store.CheckInvariants(f.ctx)
	require.NoError(t, err)
	broken := map[string]int64{}
	for _, v := range vs {
		broken[v.Rule] = v.Rows
	}
	require.EqualValues(t, 1, broken["RowHasTask"], "%v", vs)
}

// tunedPool is a pool on a fresh test database with the settings of a replica's connections.
func tunedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(queuetest.NewPool(t).Config().ConnString())
	require.NoError(t, err)
	TunePool(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestTunePool: a replica's connections run with the settings TunePool documents.
func TestTunePool(t *testing.T) {
	t.Parallel()
	pool := tunedPool(t)
	for setting, want := range map[string]string{"enable_seqscan": "off", "jit": "off"} {
		var got string
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_setting($1)", setting).Scan(&got))
		require.Equal(t, want, got, setting)
	}
}

// TestFastLeaseKeepsItsGenericPlan: the fast lease is planned once per connection, not at every
// call (planning it costs about as much as running it), and forcing that leaves the session as
// it was.
func TestFastLeaseKeepsItsGenericPlan(t *testing.T) {
	f := newFixture(t)
	cfg, err := pgxpool.ParseConfig(f.pool.Config().ConnString())
	require.NoError(t, err)
	TunePool(cfg)
	cfg.MaxConns = 1 // every lease and the check below share one session
	pool, err := pgxpool.NewWithConfig(f.ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := New(pool, Config{Replica: "r1", LeaseTimeout: testLease, NowFunc: f.clock.Now})
	for range 40 {
		f.task()
	}
	for i := range 10 {
		leases, err := store.Lease(f.ctx, LeaseRequest{ServiceID: f.svc, Workers: []string{
			fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i), fmt.Sprintf("c%d", i), fmt.Sprintf("d%d", i)}})
		require.NoError(t, err)
		require.Len(t, leases, 4)
	}
	var generic, custom int64
	require.NoError(t, pool.QueryRow(f.ctx, `
		SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '-- name: LeaseFresh %'`).Scan(&generic, &custom))
	require.Zero(t, custom, "plans made for a call's values")
	require.EqualValues(t, 10, generic)
	// The setting ended with each lease's transaction: the session's other statements (claims
	// above all) keep PostgreSQL's choice.
	var mode string
	require.NoError(t, pool.QueryRow(f.ctx, "SELECT current_setting('plan_cache_mode')").Scan(&mode))
	require.Equal(t, "auto", mode)
}
