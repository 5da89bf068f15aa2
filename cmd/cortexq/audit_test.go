package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
)

// auditViews are the views of migrations/00003_audit_views.sql, each also sql/audit/<name>.sql.
var auditViews = []string{"in_flight", "late_results", "dead_letters", "task_history", "worker_activity", "replica_load"}

// sqlBody strips a query of its comment lines, final semicolon and layout.
func sqlBody(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	return strings.TrimSuffix(strings.Join(strings.Fields(strings.Join(lines, "\n")), " "), ";")
}

func TestAuditQueryFilesMatchViews(t *testing.T) {
	t.Parallel()
	mig, err := os.ReadFile("../../migrations/00003_audit_views.sql")
	require.NoError(t, err)
	up, _, ok := strings.Cut(string(mig), "-- +goose Down")
	require.True(t, ok)
	views := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)CREATE VIEW audit_(\w+) AS\n(.*?;)\nCOMMENT ON VIEW`).FindAllStringSubmatch(up, -1) {
		views[m[1]] = sqlBody(m[2])
	}
	require.Len(t, views, len(auditViews))
	for _, name := range auditViews {
		file, err := os.ReadFile(filepath.Join("../../sql/audit", name+".sql"))
		require.NoError(t, err)
		require.Equal(t, sqlBody(string(file)), views[name], "sql/audit/%s.sql and view audit_%s differ", name, name)
	}
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

	for _, name := range auditViews {
		var n int
		require.NoError(t, d.pool.QueryRow(d.ctx, "SELECT count(*) FROM audit_"+name).Scan(&n), name)
		q, err := os.ReadFile(filepath.Join("../../sql/audit", name+".sql"))
		require.NoError(t, err)
		rows, err := d.pool.Query(d.ctx, string(q))
		require.NoError(t, err, name)
		m := 0
		for rows.Next() {
			m++
		}
		require.NoError(t, rows.Err(), name)
		require.Equal(t, n, m, "sql/audit/%s.sql and its view return as many rows", name)
	}

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

	// A rerun holds the in-flight row for late results, which are now stale.
	d.ok("rerun", "--corpus", "c", "--service", "echo")
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_late_results WHERE task_id = $1 AND stale AND workers = '{w1,w2}' AND finished_attempt IS NULL AND forget_in_seconds > 0`, retry))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM audit_in_flight`))
}
