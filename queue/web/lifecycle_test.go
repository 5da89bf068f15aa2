package web_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/web"
)

// TestLifecycleForms: the dashboard's lifecycle forms add a service and a corpus, and delete
// the corpus only once its confirmation step, which shows the rows per table it would remove,
// is confirmed; nothing orphaned after; each step audited (surface web).
func TestLifecycleForms(t *testing.T) {
	t.Parallel()
	reg := jobops.Registry("test")
	f := newFixture(t, web.Config{AdminToken: token, Jobs: reg})
	c := f.client()
	require.Equal(t, http.StatusSeeOther, c.login(token).code)
	csrf := c.csrf()
	page := c.get("/lifecycle")
	require.Equal(t, http.StatusOK, page.code)
	require.Contains(t, page.body, `value="corpus delete"`)
	form := func(v url.Values) response {
		t.Helper()
		v.Set("csrf", csrf)
		r := c.post("/lifecycle", v)
		require.Equal(t, http.StatusOK, r.code, r.body)
		return r
	}
	require.Contains(t, form(url.Values{"op": {"service add"}, "service": {"svc_w"}}).body, "added service svc_w")
	dir := t.TempDir()
	p := filepath.Join(dir, "one", "source.zip")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, zipOf(t, map[string]string{"main.tex": "one"}), 0o644))
	require.Contains(t, form(url.Values{"op": {"corpus add"}, "corpus": {"web_life"}, "path": {dir}, "service": {"svc_w"}}).body, "import job")
	var id int64
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT id FROM jobs WHERE kind = 'import'`).Scan(&id))
	require.Contains(t, c.get("/jobs").body, "import", "the /jobs page lists the corpus's import")
	runner, err := jobs.NewRunner(jobs.Env{Base: f.base}, reg, jobs.Config{Beat: 100 * time.Millisecond, Name: "test"})
	require.NoError(t, err)
	require.NoError(t, runner.Start(context.Background()))
	defer runner.Stop()
	require.Equal(t, "completed", waitJob(t, c, id)["state"])

	tasks := func() int64 {
		var n int64
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE c.name = 'web_life'`).Scan(&n))
		return n
	}
	step := form(url.Values{"op": {"corpus delete"}, "corpus": {"web_life"}})
	require.Contains(t, step.body, "nothing changed yet")
	require.Contains(t, step.body, "<td>tasks</td><td>1</td>")
	require.Contains(t, step.body, `name="confirm" value="1"`)
	require.EqualValues(t, 1, tasks(), "the confirmation step deletes nothing")
	done := form(url.Values{"op": {"corpus delete"}, "corpus": {"web_life"}, "confirm": {"1"}})
	require.Contains(t, done.body, "rows removed (1 tasks)")
	require.Zero(t, tasks())
	orphans, err := queuetest.Orphans(f.ctx, f.pool)
	require.NoError(t, err)
	require.Empty(t, orphans)

	rows, err := f.pool.Query(f.ctx, `SELECT action || ' ' || outcome FROM audit_log WHERE surface = 'web' ORDER BY id`)
	require.NoError(t, err)
	var audit []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		audit = append(audit, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"sign-in ok", "service add ok", "corpus add ok", "corpus delete dry_run", "corpus delete ok"}, audit,
		"the sign-in, then each step of the lifecycle form (its action named by the step)")
}
