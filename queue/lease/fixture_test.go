package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/testfactory"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// fixture is one test's database, store, clock, corpus and service.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	store  *Store
	clock  *queuetest.Clock
	corpus int32
	svc    int32
	seq    atomic.Int64
}

// testLease is the lease of the reference's tests: long enough that only moved time expires it.
const testLease = time.Hour

func newFixture(t *testing.T, opts ...func(*Config)) *fixture {
	t.Helper()
	t.Parallel()
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	clock := queuetest.NewClock(testfactory.DBNow(ctx, t, pool))
	cfg := Config{Replica: "r1", LeaseTimeout: testLease, NowFunc: clock.Now}
	for _, o := range opts {
		o(&cfg)
	}
	f := &fixture{t: t, ctx: ctx, pool: pool, store: New(pool, cfg), clock: clock}
	f.corpus = testfactory.Corpus(ctx, t, pool, nil).ID
	f.svc = f.service("echo", 0)
	return f
}

func noWindow(c *Config) { c.LateResultWindow = LateResultWindowNone }

func (f *fixture) service(name string, lease time.Duration) int32 {
	f.t.Helper()
	return testfactory.Service(f.ctx, f.t, f.pool, &testfactory.ServiceOpts{Name: name, LeaseTimeout: lease}).ID
}

// task inserts a TODO task of the fixture's service.
func (f *fixture) task() int64 { return f.taskOf(f.svc) }

func (f *fixture) taskOf(svc int32) int64 {
	f.t.Helper()
	return testfactory.Task(f.ctx, f.t, f.pool, &testfactory.TaskOpts{ServiceID: svc, CorpusID: f.corpus})
}

// leasedTo inserts a task leased to workers in turn (the current attempt is the last one), with
// retries = attempts-1, dispatched so long ago that its lease has expired.
func (f *fixture) leasedTo(workers ...string) int64 {
	return f.insertLeased(f.svc, -10*time.Duration(len(workers)+1)*testLease, workers)
}

// leasedNowTo is leasedTo with a lease that has not expired.
func (f *fixture) leasedNowTo(workers ...string) int64 {
	return f.insertLeased(f.svc, 0, workers)
}

func (f *fixture) insertLeased(svc int32, age time.Duration, workers []string) int64 {
	f.t.Helper()
	return testfactory.Leased(f.ctx, f.t, f.pool, &testfactory.LeasedOpts{ServiceID: svc, CorpusID: f.corpus,
		Workers: workers, LeasedAt: f.clock.Now().Add(age), LeaseTimeout: testLease, Replica: "r1"})
}

func (f *fixture) upsert(rows ...dbsqlc.Dispatch) {
	f.t.Helper()
	testfactory.Dispatch(f.ctx, f.t, f.pool, rows...)
}

// dispatchUpsert writes whole dispatch rows given as a JSON array, returning the error.
var dispatchUpsert = testfactory.DispatchJSON

func (f *fixture) lease(workers ...string) []Lease {
	return f.leaseOf(f.svc, 0, workers...)
}

func (f *fixture) leaseOf(svc int32, timeout time.Duration, workers ...string) []Lease {
	f.t.Helper()
	leases, err := f.store.Lease(f.ctx, LeaseRequest{ServiceID: svc, LeaseTimeout: timeout, Workers: workers})
	require.NoError(f.t, err)
	return leases
}

func (f *fixture) leaseOne(worker string) Lease {
	f.t.Helper()
	leases := f.lease(worker)
	require.Len(f.t, leases, 1, "a task is leased to %s", worker)
	return leases[0]
}

func (f *fixture) reply(r Result, publish PublishFunc) Decision {
	f.t.Helper()
	ds, err := f.store.Claim(f.ctx, []Result{r}, publish)
	require.NoError(f.t, err)
	require.Len(f.t, ds, 1)
	return ds[0]
}

func (f *fixture) claim(id int64, worker string, status queue.Status) Decision {
	return f.reply(Result{TaskID: id, Worker: worker, Kind: KindReport, Status: status,
		Messages: []queue.Message{{Severity: queue.SeverityInfo, Category: "test", What: worker}}}, nil)
}

// accepted claims a result and requires it accepted, returning its attempt and lateness.
func (f *fixture) accepted(id int64, worker string, status queue.Status) (int, Late) {
	f.t.Helper()
	d := f.claim(id, worker, status)
	require.Equal(f.t, OutcomeAccepted, d.Outcome, "result of %s for task %d: %s", worker, id, d.Reason)
	return d.Attempt, d.Late
}

func (f *fixture) deferCause(id int64, worker string, cause []queue.Message) Decision {
	return f.reply(Result{TaskID: id, Worker: worker, Kind: KindRetryable, Status: queue.StatusFatal, Messages: cause}, nil)
}

func (f *fixture) unusable(id int64, worker string) Decision {
	return f.reply(Result{TaskID: id, Worker: worker, Kind: KindUnusable}, nil)
}

func (f *fixture) reap() ReapSummary {
	f.t.Helper()
	sum, err := f.store.Reap(f.ctx, 0)
	require.NoError(f.t, err)
	return sum
}

func (f *fixture) rerun() RerunSummary {
	f.t.Helper()
	sum, err := f.store.Rerun(f.ctx, RerunScope{CorpusID: f.corpus, ServiceID: f.svc})
	require.NoError(f.t, err)
	return sum
}

func (f *fixture) inFlight() int {
	f.t.Helper()
	n, err := f.store.InFlight(f.ctx, true)
	require.NoError(f.t, err)
	return n
}

// settling counts held rows.
func (f *fixture) settling() int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM dispatch WHERE state = 'settling'`).Scan(&n))
	return n
}

// rows returns a task's dispatch rows, oldest run first.
func (f *fixture) rows(id int64) []dbsqlc.Dispatch {
	f.t.Helper()
	rs, err := f.pool.Query(f.ctx, `SELECT task_id, run, state, attempt_workers, answered, queued, retries, dead_lettered, finished_attempt, finished_status FROM dispatch WHERE task_id = $1 ORDER BY run`, id)
	require.NoError(f.t, err)
	defer rs.Close()
	var out []dbsqlc.Dispatch
	for rs.Next() {
		var d dbsqlc.Dispatch
		require.NoError(f.t, rs.Scan(&d.TaskID, &d.Run, &d.State, &d.AttemptWorkers, &d.Answered, &d.Queued, &d.Retries, &d.DeadLettered, &d.FinishedAttempt, &d.FinishedStatus))
		out = append(out, d)
	}
	require.NoError(f.t, rs.Err())
	return out
}

func (f *fixture) row(id int64) dbsqlc.Dispatch {
	f.t.Helper()
	rs := f.rows(id)
	require.NotEmpty(f.t, rs, "task %d has a dispatch row", id)
	return rs[len(rs)-1]
}

func (f *fixture) status(id int64) queue.Status {
	f.t.Helper()
	var st int16
	require.NoError(f.t, f.pool.QueryRow(f.ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&st))
	return queue.Status(st)
}

// whats returns (category, what) of a task's current messages.
func (f *fixture) whats(id int64) [][2]string {
	f.t.Helper()
	rs, err := f.pool.Query(f.ctx, `SELECT m.category, m.what FROM task_messages m JOIN tasks t ON t.id = m.task_id AND t.run = m.run WHERE m.task_id = $1 ORDER BY m.id`, id)
	require.NoError(f.t, err)
	defer rs.Close()
	var out [][2]string
	for rs.Next() {
		var c, w string
		require.NoError(f.t, rs.Scan(&c, &w))
		out = append(out, [2]string{c, w})
	}
	return out
}

func whatsOf(msgs []queue.Message) [][2]string {
	var out [][2]string
	for _, m := range msgs {
		out = append(out, [2]string{m.Category, m.What})
	}
	return out
}

func timeoutCause() []queue.Message {
	return []queue.Message{{Severity: queue.SeverityFatal, Category: "timeout", What: "wallclock", Details: "the watchdog ended the worker"}}
}

func shedCause() []queue.Message {
	return []queue.Message{{Severity: queue.SeverityFatal, Category: "oom", What: "shed"}}
}

// catalog returns a catalog on the fixture's database.
func (f *fixture) catalog() *catalog.Catalog { return catalog.New(f.pool, nil) }
