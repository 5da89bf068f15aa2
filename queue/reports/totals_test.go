package reports

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/inspect"
)

// TestTaskTotalsFollowEveryWrite drives tasks through each write path (insert, lease, claim,
// expiry, rerun, pause, resume, delete, truncate) and checks after each that the totals the
// dashboard reads (task_totals) are the counts of the tasks, before and after the fold compacts
// the ledger.
func TestTaskTotalsFollowEveryWrite(t *testing.T) {
	f := newFixture(t, noWindow)
	other := f.service("other", 0)
	read := inspect.New(f.pool, nil)
	check := func(step string) {
		t.Helper()
		counted, err := read.Progress(f.ctx, "", "")
		require.NoError(t, err, step)
		for i := range counted { // read from the attempts trail (Activity), not the totals
			counted[i].DeadLetters, counted[i].RepliesLastMinute, counted[i].LeasesLastMinute, counted[i].LeaseShare = 0, 0, 0, 0
		}
		totals, err := read.TotalsProgress(f.ctx)
		require.NoError(t, err, step)
		require.Equal(t, counted, totals, "%s: totals against counts", step)
		_, err = f.rep.FoldAll(f.ctx, 0) // compacts the ledger
		require.NoError(t, err, step)
		totals, err = read.TotalsProgress(f.ctx)
		require.NoError(t, err, step)
		require.Equal(t, counted, totals, "%s: compacted totals against counts", step)
		var rows int
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM task_totals`).Scan(&rows))
		require.LessOrEqual(t, rows, 2*7, "%s: one row per corpus, service and status once compacted", step)
	}
	check("empty")
	var ids []int64
	for range 6 {
		ids = append(ids, f.task())
	}
	f.taskOf(other)
	check("inserted")
	leases := f.lease("w1", "w2", "w3")
	require.Len(t, leases, 3)
	check("leased")
	f.accepted(leases[0].TaskID, "w1", queue.StatusNoProblem)
	f.accepted(leases[1].TaskID, "w2", queue.StatusError)
	check("claimed")
	f.clock.Advance(2 * testLease)
	f.reap()
	check("expired")
	f.rerun()
	check("rerun")
	_, err := f.store.Pause(f.ctx, queue.Scope{CorpusID: f.corpus, ServiceID: f.svc})
	require.NoError(t, err)
	check("paused")
	_, err = f.store.Resume(f.ctx, queue.Scope{CorpusID: f.corpus, ServiceID: f.svc})
	require.NoError(t, err)
	check("resumed")
	_, err = f.pool.Exec(f.ctx, `UPDATE tasks SET status = -3 WHERE id = ANY($1)`, ids[:3])
	require.NoError(t, err)
	check("updated behind the write paths' backs")
	_, err = f.pool.Exec(f.ctx, `DELETE FROM tasks WHERE id = ANY($1)`, ids[2:5])
	require.NoError(t, err)
	check("deleted")
	_, err = f.pool.Exec(f.ctx, `TRUNCATE tasks CASCADE`)
	require.NoError(t, err)
	check("truncated")
}
