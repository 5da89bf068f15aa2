package reports

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/leasetest"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Every query of report, runs, diff and sandbox list runs in a transaction left open; leases,
// claims, a rerun, a sandbox's creation and deletion all complete meanwhile: no report holds a
// lock they wait on.
func TestReportsHoldNoLockClaimsOrRerunsWaitOn(t *testing.T) {
	f := newFixture(t)
	for range 6 {
		f.task()
	}
	for i, l := range f.lease("w0", "w1", "w2") {
		f.accepted(l.TaskID, l.Worker, []queue.Status{queue.StatusError, queue.StatusFatal, queue.StatusNoProblem}[i])
	}
	f.rerun()                         // a closed run to diff with
	_, err := f.rep.FoldAll(f.ctx, 0) // and a kept matrix
	require.NoError(t, err)
	runs, err := f.rep.Runs(f.ctx, queue.Scope{CorpusID: f.corpus, ServiceID: f.svc})
	require.NoError(t, err)
	require.Len(t, runs, 2)

	tx, err := f.pool.BeginTx(f.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(f.ctx) }()
	q := dbsqlc.New(tx)
	from := int16(queue.StatusError)
	_, err = q.ReportStatuses(f.ctx, f.corpus, f.svc)
	require.NoError(t, err)
	_, err = q.ReportCategories(f.ctx, dbsqlc.ReportCategoriesParams{CorpusID: f.corpus, ServiceID: f.svc,
		Status: -4, NoMessages: true, Lim: 10})
	require.NoError(t, err)
	_, err = q.ReportWhats(f.ctx, dbsqlc.ReportWhatsParams{CorpusID: f.corpus, ServiceID: f.svc, Status: -1,
		Category: "test", Lim: 10})
	require.NoError(t, err)
	np := int16(-1)
	k, err := q.ReportKindTasks(f.ctx, dbsqlc.ReportKindTasksParams{CorpusID: f.corpus, ServiceID: f.svc, Status: &np,
		Severity: "info", Category: "test", What: "w2"})
	require.NoError(t, err)
	_, err = q.ReportKindTasksFew(f.ctx, dbsqlc.ReportKindTasksFewParams{CorpusID: f.corpus, ServiceID: f.svc, Status: &np,
		Kind: k.Kind, Lim: 10})
	require.NoError(t, err)
	_, err = q.ReportKindTasksWalk(f.ctx, dbsqlc.ReportKindTasksWalkParams{CorpusID: f.corpus, ServiceID: f.svc,
		Kind: k.Kind, Lim: 10})
	require.NoError(t, err)
	_, err = q.ReportKindMessages(f.ctx, dbsqlc.ReportKindMessagesParams{Kind: k.Kind, Status: &np,
		TaskIds: []int64{1}, Skips: []int32{0}, Takes: []int32{10}})
	require.NoError(t, err)
	_, err = q.ReportAllSeverities(f.ctx, f.corpus, f.svc)
	require.NoError(t, err)
	_, err = q.ReportAllNames(f.ctx, dbsqlc.ReportAllNamesParams{CorpusID: f.corpus, ServiceID: f.svc, Severity: "info", Lim: 10})
	require.NoError(t, err)
	_, err = q.ReportNoMessages(f.ctx, dbsqlc.ReportNoMessagesParams{CorpusID: f.corpus, ServiceID: f.svc, Status: -4,
		Severity: "fatal", Lim: 10})
	require.NoError(t, err)
	_, err = q.ReportFoldState(f.ctx)
	require.NoError(t, err)
	_, err = q.RunList(f.ctx, f.corpus, f.svc)
	require.NoError(t, err)
	_, err = q.DiffMatrixCurrent(f.ctx, runs[0].ID, f.corpus, f.svc)
	require.NoError(t, err)
	_, err = q.DiffMatrixClosed(f.ctx, runs[0].ID, runs[0].ID)
	require.NoError(t, err)
	_, err = q.DiffCellCurrent(f.ctx, dbsqlc.DiffCellCurrentParams{FromRun: runs[0].ID, CorpusID: f.corpus,
		ServiceID: f.svc, ToStatus: 0, FromStatus: &from, Lim: 10})
	require.NoError(t, err)
	_, err = q.DiffCellClosed(f.ctx, dbsqlc.DiffCellClosedParams{FromRun: runs[0].ID, ToRun: runs[0].ID,
		ToStatus: -3, FromStatus: &from, Lim: 10})
	require.NoError(t, err)
	_, err = q.SandboxList(f.ctx)
	require.NoError(t, err)
	// The kept diff matrices: read, and a closed pair kept on first use.
	_, err = q.DiffCurrentStored(f.ctx, f.corpus, f.svc, runs[0].ID)
	require.NoError(t, err)
	_, err = q.DiffClosedStored(f.ctx, runs[0].ID, runs[0].ID)
	require.NoError(t, err)
	require.NoError(t, q.DiffClosedStore(f.ctx, dbsqlc.DiffClosedStoreParams{CorpusID: f.corpus, ServiceID: f.svc,
		FromRun: runs[0].ID, ToRun: runs[0].ID, FromStatuses: []int16{-128}, ToStatuses: []int16{-3}, Tasks: []int64{1}}))

	// With the report's transaction open, the writers go through (a wait would hit the deadline).
	ctx, cancel := context.WithTimeout(f.ctx, 20*time.Second)
	defer cancel()
	leases, err := leasetest.Lease(ctx, f.store, leasetest.Request{ServiceID: f.svc, Workers: []string{"w3", "w4"}})
	require.NoError(t, err)
	require.Len(t, leases, 2)
	ds, err := leasetest.Claim(ctx, f.store, []lease.Result{{TaskID: leases[0].TaskID, Worker: "w3", Kind: lease.KindReport,
		Status: queue.StatusWarning}}, nil)
	require.NoError(t, err)
	require.Equal(t, lease.OutcomeAccepted, ds[0].Outcome)
	sum, err := f.store.Rerun(ctx, lease.RerunScope{CorpusID: f.corpus, ServiceID: f.svc})
	require.NoError(t, err)
	require.Equal(t, 6, sum.Tasks)
	sb, err := f.rep.CreateSandbox(ctx, "sb", lease.RerunScope{CorpusID: f.corpus, ServiceID: f.svc}, catalog.SandboxPriority)
	require.NoError(t, err)
	require.Equal(t, int64(6), sb.Tasks)
	gone, err := f.rep.DeleteSandbox(ctx, "sb")
	require.NoError(t, err)
	require.Equal(t, 6, gone.Tasks)
	require.NoError(t, ctx.Err())
}

// TestSandboxStartsAtAHigherPriority: a sandbox's tasks are leased before its parent's, which
// it copied them from (catalog.SandboxPriority).
func TestSandboxStartsAtAHigherPriority(t *testing.T) {
	f := newFixture(t)
	parent, err := dbsqlc.New(f.pool).CorpusCreate(f.ctx, "parent", "/parent", nil)
	require.NoError(t, err)
	_, err = f.pool.Exec(f.ctx, `INSERT INTO tasks (service_id, corpus_id, entry)
		SELECT $1, $2, '/parent/' || g || '.zip' FROM generate_series(1, 1000) g`, f.svc, parent.ID)
	require.NoError(t, err)
	sb, err := f.rep.CreateSandbox(f.ctx, "box", lease.RerunScope{CorpusID: parent.ID, ServiceID: f.svc, Note: "box"}, catalog.SandboxPriority)
	require.NoError(t, err)
	require.Equal(t, int64(1_000), sb.Tasks)
	shares, err := f.catalog().Shares(f.ctx, "echo")
	require.NoError(t, err)
	require.Equal(t, "box", shares[0].Corpus, "highest priority first")
	require.Equal(t, int32(catalog.SandboxPriority), shares[0].Priority)
	require.True(t, shares[0].Sandbox)
	workers := make([]string, 64)
	for i := range workers {
		workers[i] = fmt.Sprintf("w%d", i)
	}
	by := map[int32]int{}
	for _, l := range f.lease(workers...) {
		by[l.CorpusID]++
	}
	require.Equal(t, len(workers), by[sb.ID], "the sandbox's tasks go before its parent's")
}

// TestSandboxDeleteLeavesNoOrphan: deleting a sandbox leaves no row keyed by its id (its
// task_totals ledger had a negative row for each positive one: queuetest.Orphans reads every
// keyed table), and its parent's totals are untouched.
func TestSandboxDeleteLeavesNoOrphan(t *testing.T) {
	f := newFixture(t)
	parent, err := dbsqlc.New(f.pool).CorpusCreate(f.ctx, "parent", "/parent", nil)
	require.NoError(t, err)
	_, err = f.pool.Exec(f.ctx, `INSERT INTO tasks (service_id, corpus_id, entry, status)
		SELECT $1, $2, '/parent/' || g || '.zip', -1 - g % 3 FROM generate_series(1, 30) g`, f.svc, parent.ID)
	require.NoError(t, err)
	totals := func(corpus int32) (rows, tasks int64) {
		t.Helper()
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*), coalesce(sum(tasks), 0) FROM task_totals WHERE corpus_id = $1`,
			corpus).Scan(&rows, &tasks))
		return rows, tasks
	}
	_, before := totals(parent.ID)
	require.EqualValues(t, 30, before)
	sb, err := f.rep.CreateSandbox(f.ctx, "box", lease.RerunScope{CorpusID: parent.ID, ServiceID: f.svc}, catalog.SandboxPriority)
	require.NoError(t, err)
	require.EqualValues(t, 30, sb.Tasks)
	_, err = f.rep.FoldAll(f.ctx, 0)
	require.NoError(t, err)
	gone, err := f.rep.DeleteSandbox(f.ctx, "box")
	require.NoError(t, err)
	require.Equal(t, 30, gone.Tasks)
	rows, _ := totals(sb.ID)
	require.Zero(t, rows, "no task_totals row of the deleted sandbox (none negative)")
	var negative int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM (SELECT corpus_id, service_id, status FROM task_totals
		GROUP BY 1, 2, 3 HAVING sum(tasks) < 0) n`).Scan(&negative))
	require.Zero(t, negative)
	orphans, err := queuetest.Orphans(f.ctx, f.pool)
	require.NoError(t, err)
	require.Empty(t, orphans)
	_, after := totals(parent.ID)
	require.Equal(t, before, after, "the parent's totals")
	_, err = f.rep.FoldAll(f.ctx, 0)
	require.NoError(t, err, "a fold after the deletion")
	orphans, err = queuetest.Orphans(f.ctx, f.pool)
	require.NoError(t, err)
	require.Empty(t, orphans)
}
