package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/leasetest"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// TestReader imports three tasks, leases two and records a Warning for one, then reads back
// what an operator sees: progress, dispatch counts, one task's history, the invariants.
func TestReader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	cat := catalog.New(pool, nil)
	svc, err := cat.AddService(ctx, "echo", 0)
	require.NoError(t, err)
	_, err = cat.Import(ctx, catalog.ImportRequest{Corpus: "c", CorpusPath: "/c", ServiceID: svc.ID,
		Entries: []string{"/c/1.zip", "/c/2.zip", "/c/3.zip"}})
	require.NoError(t, err)
	store := lease.New(pool, lease.Config{Replica: "r1"})
	leases, err := leasetest.Lease(ctx, store, leasetest.Request{ServiceID: svc.ID, Workers: []string{"w1", "w2"}})
	require.NoError(t, err)
	require.Len(t, leases, 2)
	done := leases[0]
	ds, err := leasetest.Claim(ctx, store, []lease.Result{{TaskID: done.TaskID, Worker: done.Worker, Kind: lease.KindReport,
		Status: queue.StatusWarning, Messages: []queue.Message{{Severity: queue.SeverityWarning, Category: "c", What: "w", Details: "d"}}}},
		func(*lease.Decision) error { return nil })
	require.NoError(t, err)
	require.Equal(t, lease.OutcomeAccepted, ds[0].Outcome)

	r := inspect.New(pool, nil)
	ps, err := r.Progress(ctx, "c", "echo")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	p := ps[0]
	require.Equal(t, [4]int64{3, 1, 1, 1}, [4]int64{p.Tasks, p.TODO, p.Dispatched, p.Warning})
	require.Equal(t, int64(1), p.InFlight)
	require.Equal(t, int64(1), p.Done())
	require.False(t, p.Finished())
	none, err := r.Progress(ctx, "no such corpus", "")
	require.NoError(t, err)
	require.Empty(t, none)

	counts, err := r.DispatchCounts(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), counts.InFlight)
	require.Zero(t, counts.Reserved+counts.Queued+counts.DeadLettered)

	h, err := r.TaskHistory(ctx, done.TaskID)
	require.NoError(t, err)
	require.Equal(t, queue.StatusWarning, h.Status)
	require.Len(t, h.Attempts, 1)
	require.Equal(t, done.Worker, h.Attempts[0].Worker)
	require.Equal(t, "accepted", h.Attempts[0].Outcome)
	require.Len(t, h.Messages, 1)
	require.Equal(t, "w", h.Messages[0].What)
	_, err = r.TaskHistory(ctx, 1<<40)
	require.ErrorIs(t, err, queue.ErrNotFound)

	p50, _, err := r.Latency(ctx, p.CorpusID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, p50, time.Duration(0))
	_, ok, err := r.LastReapAge(ctx)
	require.NoError(t, err)
	require.False(t, ok, "no reaper pass recorded yet")

	vs, err := r.CheckInvariants(ctx)
	require.NoError(t, err)
	require.Empty(t, vs)
	_, err = pool.Exec(ctx, `UPDATE tasks SET status = 1 WHERE id = (SELECT min(id) FROM tasks WHERE status = 0)`)
	require.NoError(t, err)
	vs, err = r.CheckInvariants(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, vs, "a dispatched task with no dispatch row breaks a rule")
}
