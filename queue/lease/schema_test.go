package lease

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/inspect"
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
	vs, err := inspect.New(f.pool, nil).CheckInvariants(f.ctx)
	require.NoError(t, err)
	require.Empty(t, vs)

	// A row written for a task that does not exist (no key refuses it) is reported.
	_, err = f.pool.Exec(f.ctx, `
		INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, replica, service_id,
		                      lease_timeout_seconds, leased_at)
		VALUES ($1, 1, 'in_flight', '{w9}', now(), 'r1', $2, 60, now())`, inFlight, f.svc)
	require.NoError(t, err)
	vs, err = inspect.New(f.pool, nil).CheckInvariants(f.ctx)
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
	for setting, want := range map[string]string{"enable_seqscan": "off", "jit": "off", "idle_in_transaction_session_timeout": "1min"} {
		var got string
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_setting($1)", setting).Scan(&got))
		require.Equal(t, want, got, setting)
	}
}

// TestReserveAndAttributeKeepTheirGenericPlans: the fast reservation and the attribution of
// hand-outs are planned once per connection, not at every call (planning costs about as much
// as running them), and forcing that leaves the session as it was.
func TestReserveAndAttributeKeepTheirGenericPlans(t *testing.T) {
	f := newFixture(t)
	pool, store := f.oneSession()
	for range 40 {
		f.task()
	}
	for i := range 10 {
		leases, err := store.Lease(f.ctx, LeaseRequest{ServiceID: f.svc, Workers: []string{
			fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i), fmt.Sprintf("c%d", i), fmt.Sprintf("d%d", i)}})
		require.NoError(t, err)
		require.Len(t, leases, 4)
	}
	requireGenericPlans(t, pool, 10, "ReserveFresh", "Attribute")
	// The setting ended with each lease's transaction: the session's other statements keep
	// PostgreSQL's choice.
	requirePlanCacheMode(t, pool, "auto")
}

// TestClaimKeepsItsGenericPlans: a claim's statements are planned once per connection, not at
// every call, also for batches of varying sizes without messages (for which PostgreSQL, left to
// choose, planned Apply afresh at every call); a plan made while the tables were empty reads only
// the claimed tasks' rows once the tables hold many; and the forcing ends with each claim.
func TestClaimKeepsItsGenericPlans(t *testing.T) {
	f := newFixture(t)
	pool, store := f.oneSession()
	// The statistics of a just-migrated database: empty tables.
	_, err := pool.Exec(f.ctx, "VACUUM ANALYZE tasks, dispatch, attempts, task_message_logs")
	require.NoError(t, err)
	claimBatch := func(n int, msgs []queue.Message) {
		t.Helper()
		for range n {
			f.task()
		}
		workers := make([]string, n)
		for i := range workers {
			workers[i] = fmt.Sprintf("w%d", f.seq.Add(1))
		}
		leases, err := store.Lease(f.ctx, LeaseRequest{ServiceID: f.svc, Workers: workers})
		require.NoError(t, err)
		require.Len(t, leases, n)
		results := make([]Result, n)
		for i, l := range leases {
			results[i] = Result{TaskID: l.TaskID, Worker: l.Worker, ServiceID: f.svc, Kind: KindReport,
				Status: queue.StatusNoProblem, Messages: msgs}
		}
		ds, err := store.Claim(f.ctx, results, nil)
		require.NoError(t, err)
		for _, d := range ds {
			require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)
		}
	}
	for i := range 10 {
		claimBatch(1+i%4, nil)
	}
	requireGenericPlans(t, pool, 10, "Apply", "TaskLockForClaim", "DispatchLockForTasks", "ReserveFresh", "Attribute")
	requirePlanCacheMode(t, pool, "auto")

	// The logs of many other tasks, and no new statistics (which would make new plans): the
	// plans made on empty tables stay, and the next claim still reads only its tasks' logs.
	_, err = pool.Exec(f.ctx, `
		INSERT INTO task_message_logs (task_id, run, kinds, details)
		SELECT -g, 1, '{1,1,1}', NULL FROM generate_series(1, 20000) AS g`)
	require.NoError(t, err)
	before := rowsRead(t, pool, "task_message_logs")
	claimBatch(4, []queue.Message{{Severity: queue.SeverityInfo, Category: "latexml", What: "math", Details: "2 formulae"}})
	require.Less(t, rowsRead(t, pool, "task_message_logs")-before, int64(100), "log rows read by a claim of 4 tasks")
	requireGenericPlans(t, pool, 11, "Apply")
}

// oneSession is a store whose every statement runs on one connection, set up as a replica's.
func (f *fixture) oneSession() (*pgxpool.Pool, *Store) {
	f.t.Helper()
	cfg, err := pgxpool.ParseConfig(f.pool.Config().ConnString())
	require.NoError(f.t, err)
	TunePool(cfg)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(f.ctx, cfg)
	require.NoError(f.t, err)
	f.t.Cleanup(pool.Close)
	return pool, New(pool, Config{Replica: "r1", LeaseTimeout: testLease, NowFunc: f.clock.Now})
}

// requireGenericPlans checks that the session ran each named statement calls times, always with
// its generic plan.
func requireGenericPlans(t *testing.T, pool *pgxpool.Pool, calls int64, names ...string) {
	t.Helper()
	for _, name := range names {
		var generic, custom int64
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT generic_plans, custom_plans FROM pg_prepared_statements
			WHERE statement LIKE '-- name: ' || $1 || ' %'`, name).Scan(&generic, &custom), name)
		require.Zero(t, custom, "%s: plans made for a call's values", name)
		require.Equal(t, calls, generic, name)
	}
}

// rowsRead is how many rows of table the test's database has read so far, through its indexes
// or by scanning it, counting everything pool's one session read until now.
func rowsRead(t *testing.T, pool *pgxpool.Pool, table string) (n int64) {
	t.Helper()
	ctx := context.Background()
	// A session's counters reach the shared statistics when it next goes idle.
	_, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relname = $1)
		     + (SELECT coalesce(seq_tup_read, 0) FROM pg_stat_user_tables WHERE relname = $1)`, table).Scan(&n))
	return n
}

// requirePlanCacheMode checks the session's plan_cache_mode.
func requirePlanCacheMode(t *testing.T, pool *pgxpool.Pool, want string) {
	t.Helper()
	var mode string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_setting('plan_cache_mode')").Scan(&mode))
	require.Equal(t, want, mode)
}

// TestInFlightRowsAreTheReplicasOwn: a replica's hot-mirror resync lists its own in-flight rows
// with their tasks' corpus and entry, leaving out answered rows and other replicas' rows; and it
// looks each task up by id, also where dispatch's statistics were taken with many rows in flight
// (as a merge join it walked all of tasks' primary key).
func TestInFlightRowsAreTheReplicasOwn(t *testing.T) {
	f := newFixture(t)
	// Statistics taken while 20,000 tasks were in flight, kept after they were done (until
	// autovacuum next analyzes the table).
	_, err := f.pool.Exec(f.ctx, `
		WITH filler AS (
			INSERT INTO tasks (service_id, corpus_id, entry, status)
			SELECT $1, $2, '/corpus/filler/' || g || '/source.zip', 1 FROM generate_series(1, 20000) AS g
			RETURNING id
		)
		INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, replica, service_id,
		                      lease_timeout_seconds, leased_at)
		SELECT id, 1, 'in_flight', '{wf}', now() + interval '1 hour', 'r1', $1, 3600, now() FROM filler`,
		f.svc, f.corpus)
	require.NoError(t, err)
	_, err = f.pool.Exec(f.ctx, "ANALYZE tasks, dispatch")
	require.NoError(t, err)
	_, err = f.pool.Exec(f.ctx, "DELETE FROM dispatch WHERE attempt_workers = '{wf}'")
	require.NoError(t, err)
	for range 3 {
		f.task()
	}
	mine := f.lease("w1", "w2", "w3")
	require.Len(t, mine, 3)
	answered := mine[2]
	require.Equal(t, OutcomeUnusable, f.unusable(answered.TaskID, answered.Worker).Outcome)
	other := New(f.pool, Config{Replica: "r2", LeaseTimeout: testLease, NowFunc: f.clock.Now})
	f.task()
	theirs, err := other.Lease(f.ctx, LeaseRequest{ServiceID: f.svc, Workers: []string{"w9"}})
	require.NoError(t, err)
	require.Len(t, theirs, 1)

	session, replica := f.oneSession() // set up as a replica's connections are
	before := rowsRead(t, session, "tasks")
	got, err := replica.InFlightRows(f.ctx)
	require.NoError(t, err)
	require.Less(t, rowsRead(t, session, "tasks")-before, int64(100), "task rows read to list 2 rows")
	var want []Lease
	for _, l := range mine[:2] {
		var entry string
		require.NoError(t, f.pool.QueryRow(f.ctx, "SELECT entry FROM tasks WHERE id = $1", l.TaskID).Scan(&entry))
		want = append(want, Lease{Task: queue.Task{TaskID: l.TaskID, Run: l.Run, ServiceID: f.svc, CorpusID: f.corpus, Entry: entry}, Worker: l.Worker})
	}
	require.ElementsMatch(t, want, got)
}
