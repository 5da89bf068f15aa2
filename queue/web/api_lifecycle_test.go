package web_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/web"
)

// testAPILifecycle (TestAPIEveryEndpoint/Lifecycle) walks a corpus's life through the API, each answer validated against the
// spec: register two services, add a corpus (an import job, answered at once with its handle,
// polled until done, worked by a job runner), activate the second service, extend
// with a new file, deactivate the first, delete the corpus, delete the service. Each deletion
// previews (dry_run) the rows it then removes, leaves no row pointing at a corpus, service, task
// or run that is gone (queuetest.Orphans reads every keyed table from information_schema), and
// keeps the runs' tallies; every step appends an audit row; the fixture's own corpus is
// untouched.
func testAPILifecycle(t *testing.T) {
	reg := jobops.Registry("test")
	f := newFixture(t, web.Config{AdminToken: token, Jobs: reg})
	c := f.client()
	runner, err := jobs.NewRunner(jobs.Env{Base: f.base}, reg, jobs.Config{Beat: 100 * time.Millisecond, Name: "test"})
	require.NoError(t, err)
	require.NoError(t, runner.Start(context.Background()))
	defer runner.Stop()
	act := func(method, path, body string, want int) apiResponse {
		t.Helper()
		r := c.api(method, path, body, "Authorization", bearer)
		require.Equal(t, want, r.code, "%s %s: %s", method, path, r.body)
		return r
	}
	count := func(sql string, args ...any) int64 {
		t.Helper()
		var n int64
		require.NoError(t, f.pool.QueryRow(f.ctx, sql, args...).Scan(&n), sql)
		return n
	}
	noOrphans := func() {
		t.Helper()
		orphans, err := queuetest.Orphans(f.ctx, f.pool)
		require.NoError(t, err)
		require.Empty(t, orphans)
	}
	papers := count(`SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE c.name = 'papers'`)

	act("POST", "/api/v1/services", `{"name":"svc_a"}`, http.StatusOK)
	act("POST", "/api/v1/services", `{"name":"svc_b","lease_timeout_seconds":60}`, http.StatusOK)
	act("POST", "/api/v1/services", `{"name":"svc_a"}`, http.StatusUnprocessableEntity)
	dir := t.TempDir()
	source := func(name string) {
		p := filepath.Join(dir, name, "source.zip")
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, zipOf(t, map[string]string{"main.tex": name}), 0o644))
	}
	source("one")
	source("two")
	act("POST", "/api/v1/corpora", `{"name":"life","path":"relative/dir","service":"svc_a"}`, http.StatusUnprocessableEntity)
	act("POST", "/api/v1/corpora", `{"name":"life","path":"`+dir+`","service":"nope"}`, http.StatusUnprocessableEntity)
	require.Zero(t, count(`SELECT count(*) FROM jobs`), "a refused corpus add enqueues nothing")
	accepted := act("POST", "/api/v1/corpora", `{"name":"life","path":"`+dir+`","service":"svc_a"}`, http.StatusAccepted)
	require.Equal(t, "import", accepted.json["kind"])
	job := waitJob(t, c, int64(accepted.json["id"].(float64)))
	require.Equal(t, "completed", job["state"], job["error"])
	require.EqualValues(t, 2, job["done"], "the job's progress: done of total")
	require.EqualValues(t, 2, job["total"])
	require.EqualValues(t, 2, job["result"].(map[string]any)["added"])
	require.EqualValues(t, 2, count(`SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE c.name = 'life'`))

	scope := "/api/v1/corpora/life/services/"
	pre := act("POST", scope+"svc_b/activate?dry_run=true", "", http.StatusOK)
	require.EqualValues(t, 2, pre.json["entries"])
	require.Zero(t, count(`SELECT count(*) FROM tasks t JOIN services s ON s.id = t.service_id WHERE s.name = 'svc_b'`), "a dry run adds nothing")
	activated := act("POST", scope+"svc_b/activate", "", http.StatusOK)
	require.EqualValues(t, 2, activated.json["added"])
	require.Equal(t, true, activated.json["run_opened"])

	source("three")
	ext := act("POST", "/api/v1/corpora/life/extend", "", http.StatusOK)
	require.EqualValues(t, 3, ext.json["entries"])
	require.EqualValues(t, 2, ext.json["added"], "one new task for each of the two active services")
	require.ElementsMatch(t, []any{"svc_a", "svc_b"}, ext.json["services"])

	// Results and messages for svc_a's tasks, folded into the report, so that deactivate has them to remove.
	f.exec(`UPDATE tasks SET status = -2 FROM services s WHERE s.id = tasks.service_id AND s.name = 'svc_a'`)
	f.exec(`INSERT INTO task_messages (task_id, run, severity, category, what, details)
		SELECT t.id, 1, 'warning', 'undefined', 'cite', '' FROM tasks t JOIN services s ON s.id = t.service_id WHERE s.name = 'svc_a'`)
	f.exec(`INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, answered_at, outcome, status)
		SELECT t.id, 1, 0, 'w', 'r1', now(), now(), 'accepted', -2 FROM tasks t JOIN services s ON s.id = t.service_id WHERE s.name = 'svc_a'`)
	f.exec(`INSERT INTO report_changes (task_id) SELECT id FROM tasks`)
	_, err = reports.New(f.pool, nil, nil).FoldAll(f.ctx, 0)
	require.NoError(t, err)

	dry := act("POST", scope+"svc_a/deactivate?dry_run=true", "", http.StatusOK)
	tables := dry.json["tables"].(map[string]any)
	require.EqualValues(t, 3, tables["tasks"])
	require.EqualValues(t, 3, tables["attempts"])
	require.EqualValues(t, 3, tables["task_message_logs"])
	require.NotZero(t, tables["report_rollup"])
	require.EqualValues(t, 3, count(`SELECT count(*) FROM tasks t JOIN services s ON s.id = t.service_id WHERE s.name = 'svc_a'`), "a dry run removes nothing")
	gone := act("POST", scope+"svc_a/deactivate", "", http.StatusOK)
	tables = gone.json["tables"].(map[string]any)
	require.EqualValues(t, 3, tables["tasks"])
	require.EqualValues(t, 3, tables["attempts"])
	require.EqualValues(t, 1, gone.json["runs_closed"])
	noOrphans()
	require.Zero(t, count(`SELECT count(*) FROM tasks t JOIN services s ON s.id = t.service_id WHERE s.name = 'svc_a'`))
	require.EqualValues(t, 3, count(`SELECT warning FROM runs WHERE corpus_name = 'life' AND service_name = 'svc_a'`),
		"the closed run keeps its tallies")
	act("POST", scope+"svc_a/deactivate", "", http.StatusOK) // again: nothing left, no harm

	dry = act("DELETE", "/api/v1/corpora/life?dry_run=true", "", http.StatusOK)
	require.EqualValues(t, 3, dry.json["tables"].(map[string]any)["tasks"])
	require.EqualValues(t, 2, dry.json["runs_detached"])
	gone = act("DELETE", "/api/v1/corpora/life?files=true", "", http.StatusOK)
	require.EqualValues(t, 3, gone.json["tables"].(map[string]any)["tasks"])
	require.EqualValues(t, 1, gone.json["tables"].(map[string]any)["corpora"])
	noOrphans()
	require.EqualValues(t, 2, count(`SELECT count(*) FROM runs WHERE corpus_name = 'life' AND corpus_id IS NULL`), "runs kept by name")
	require.EqualValues(t, 3, count(`SELECT tasks FROM runs WHERE corpus_name = 'life' AND service_name = 'svc_b'`))
	require.FileExists(t, filepath.Join(dir, "one", "source.zip"), "sources stay")
	act("DELETE", "/api/v1/corpora/life", "", http.StatusNotFound)

	dry = act("DELETE", "/api/v1/services/svc_a?dry_run=true", "", http.StatusOK)
	require.EqualValues(t, 1, dry.json["runs_detached"])
	act("DELETE", "/api/v1/services/svc_a", "", http.StatusOK)
	noOrphans()
	require.EqualValues(t, 1, count(`SELECT count(*) FROM runs WHERE service_name = 'svc_a' AND service_id IS NULL AND corpus_id IS NULL`))
	require.Equal(t, papers, count(`SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE c.name = 'papers'`),
		"the other corpus is untouched")

	rows, err := f.pool.Query(f.ctx, `SELECT action || ' ' || outcome FROM audit_log WHERE surface = 'api' ORDER BY id`)
	require.NoError(t, err)
	var audit []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		audit = append(audit, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"service add ok", "service add ok", "service add refused",
		"corpus add refused", "corpus add refused", "corpus add ok",
		"activate dry_run", "activate ok", "extend ok", "deactivate dry_run", "deactivate ok", "deactivate ok",
		"corpus delete dry_run", "corpus delete ok", "corpus delete refused", "service delete dry_run", "service delete ok"}, audit)
}
