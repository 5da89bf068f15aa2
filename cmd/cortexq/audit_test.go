package main

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
)

// TestAuditViewsAreDocumented: every audit view of the migrated schema has its section in
// docs/auditing.md, and every section names a view that exists. The views are defined only in
// the migrations (a later migration replaces one with CREATE OR REPLACE VIEW); the docs are
// where operators read what each one answers.
func TestAuditViewsAreDocumented(t *testing.T) {
	d := newTestDB(t)
	rows, err := d.pool.Query(d.ctx, `SELECT viewname FROM pg_views WHERE viewname LIKE 'audit\_%' ORDER BY 1`)
	require.NoError(t, err)
	views, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	doc, err := os.ReadFile("../../docs/auditing.md")
	require.NoError(t, err)
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^## `(audit_\\w+)`").FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	require.NotEmpty(t, views)
	require.Equal(t, views, documented, "views of the schema and sections of docs/auditing.md")
}

func TestAuditViews(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 3)...)
	sc := d.scope("c", "echo")
	leases := d.lease(sc.ServiceID, "w0", "w1")
	require.Equal(t, lease.OutcomeAccepted, d.claim(lease.Result{TaskID: leases[0].TaskID, Worker: "w0",
		Kind: lease.KindReport, Status: queue.StatusNoProblem}).Outcome)
	// The second lease expires and is queued for a retry, then leased to w2.
	_, err := d.pool.Exec(d.ctx, `UPDATE dispatch SET deadline = now() - interval '1 second' WHERE task_id = $1`, leases[1].TaskID)
	require.NoError(t, err)
	_, err = d.store.Reap(d.ctx, 0)
	require.NoError(t, err)
	d.lease(sc.ServiceID, "w2")

	retry := leases[1].TaskID
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_in_flight WHERE task_id = $1 AND worker = 'w2' AND attempt = 1 AND replica = 'r1' AND overdue_seconds < 0`, retry))
	require.Equal(t, 3, d.count(`SELECT count(*) FROM audit_task_history`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_task_history WHERE worker = 'w0' AND outcome = 'accepted' AND result_status = 'no_problem' AND task_status = 'no_problem' AND current_run`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_task_history WHERE worker = 'w1' AND outcome = 'expired' AND task_status = 'dispatched'`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_worker_activity WHERE worker = 'w0' AND service = 'echo' AND dispatched = 1 AND results = 1 AND accepted = 1`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_worker_activity WHERE worker = 'w1' AND expired = 1 AND accepted = 0`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_worker_activity WHERE worker = 'w2' AND running = 1`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_replica_load WHERE replica = 'r1' AND in_flight = 1 AND leases_last_minute = 3`))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM audit_late_results`))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM audit_dead_letters`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_corpus_activity WHERE corpus = 'c' AND service = 'echo' AND dead_letters = 0 AND leases_last_minute = 3 AND replies_last_minute = 1 AND lease_share_last_minute = 1`))

	// A rerun holds the in-flight row for late results, which are now stale.
	d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo")
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_late_results WHERE task_id = $1 AND stale AND workers = '{w1,w2}' AND finished_attempt IS NULL AND forget_in_seconds > 0`, retry))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM audit_in_flight`))
}
