package reports

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/leasetest"
	"github.com/cortexq/cortexq/queue/queuetest/testfactory"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// fixture is one test's database with a corpus "corpus" and a service "echo": a lease store that
// makes the results the reports read, and the Reports under test.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	store  *lease.Store
	rep    *Store
	clock  *queuetest.Clock
	corpus int32
	svc    int32
}

// testLease is the tests' lease: long enough that only moved time expires it.
const testLease = time.Hour

func noWindow(c *lease.Config) { c.LateResultWindow = lease.LateResultWindowNone }

func newFixture(t *testing.T, opts ...func(*lease.Config)) *fixture {
	t.Helper()
	t.Parallel()
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	clock := queuetest.NewClock(testfactory.DBNow(ctx, t, pool))
	cfg := lease.Config{Replica: "r1", LeaseTimeout: testLease, NowFunc: clock.Now}
	for _, o := range opts {
		o(&cfg)
	}
	f := &fixture{t: t, ctx: ctx, pool: pool, store: lease.New(pool, cfg), rep: New(pool, clock.Now, nil), clock: clock}
	f.corpus = testfactory.Corpus(ctx, t, pool, nil).ID
	f.svc = f.service("echo", 0)
	return f
}

func (f *fixture) catalog() *catalog.Catalog { return catalog.New(f.pool, nil) }

// must(v, err)(t) fails the test on err and returns v.
func must[T any](v T, err error) func(testing.TB) T { return testfactory.Must(v, err) }

func (f *fixture) service(name string, leaseTimeout time.Duration) int32 {
	return testfactory.Service(f.ctx, f.t, f.pool, &testfactory.ServiceOpts{Name: name, LeaseTimeout: leaseTimeout}).ID
}

// task inserts a TODO task of the fixture's service; taskOf, of service svc.
func (f *fixture) task() int64 { return f.taskOf(f.svc) }

func (f *fixture) taskOf(svc int32) int64 {
	return testfactory.Task(f.ctx, f.t, f.pool, &testfactory.TaskOpts{ServiceID: svc, CorpusID: f.corpus})
}

func (f *fixture) lease(workers ...string) []lease.Lease {
	return must(leasetest.Lease(f.ctx, f.store, leasetest.Request{ServiceID: f.svc, Workers: workers}))(f.t)
}

func (f *fixture) reply(r lease.Result, publish lease.PublishFunc) lease.Decision {
	ds := must(leasetest.Claim(f.ctx, f.store, []lease.Result{r}, publish))(f.t)
	require.Len(f.t, ds, 1)
	return ds[0]
}

// accepted claims a result of status (one info message) and requires it accepted.
func (f *fixture) accepted(id int64, worker string, status queue.Status) {
	d := f.reply(lease.Result{TaskID: id, Worker: worker, Kind: lease.KindReport, Status: status,
		Messages: []queue.Message{{Severity: queue.SeverityInfo, Category: "test", What: worker}}}, nil)
	require.Equal(f.t, lease.OutcomeAccepted, d.Outcome, "result of %s for task %d: %s", worker, id, d.Reason)
}

func (f *fixture) reap() lease.ReapSummary { return must(f.store.Reap(f.ctx, 0))(f.t) }

func (f *fixture) rerun() lease.RerunSummary {
	return must(f.store.Rerun(f.ctx, lease.RerunScope{CorpusID: f.corpus, ServiceID: f.svc}))(f.t)
}
