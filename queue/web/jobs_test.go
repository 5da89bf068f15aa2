package web_test

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/web"
)

// apiJobCalls enqueues a job through the API (202 with its id), reads it alone and in the list
// of active jobs, and cancels it (no runner in the fixture: it is cancelled at once).
func apiJobCalls(t *testing.T, c *client) {
	t.Helper()
	r := c.api("POST", "/api/v1/jobs", `{"kind":"verify","args":{"quick":true}}`, "Authorization", bearer)
	require.Equal(t, http.StatusAccepted, r.code, r.body)
	id := int64(r.json["id"].(float64))
	require.Equal(t, fmt.Sprintf("/api/v1/jobs/%d", id), r.json["href"])
	one := c.api("GET", fmt.Sprintf("/api/v1/jobs/%d", id), "")
	require.Equal(t, http.StatusOK, one.code, one.body)
	require.Equal(t, "queued", one.json["state"])
	require.Equal(t, "api", one.json["surface"])
	list := c.api("GET", "/api/v1/jobs?active=true", "")
	require.Equal(t, http.StatusOK, list.code, list.body)
	require.Len(t, list.json["jobs"], 1)
	cancel := c.api("POST", fmt.Sprintf("/api/v1/jobs/%d/cancel", id), "", "Authorization", bearer)
	require.Equal(t, http.StatusOK, cancel.code, cancel.body)
	require.Equal(t, "cancelled", cancel.json["state"])
	require.Empty(t, c.api("GET", "/api/v1/jobs?active=1", "").json["jobs"])
}

// TestAPIJobsBadInput: a bad kind, bad arguments, an unknown job, a bad id or filter: 4xx JSON
// errors; enqueueing needs the token.
func TestAPIJobsBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token, Jobs: jobops.Registry("test")})
	c := f.client()
	for _, tc := range []struct {
		method, path, body string
		code               int
	}{
		{"POST", "/api/v1/jobs", `{"kind":"nope"}`, http.StatusUnprocessableEntity},
		{"POST", "/api/v1/jobs", `{"kind":"import","args":{"corpus":"c","service":"s","from_list":"relative.txt"}}`, http.StatusUnprocessableEntity},
		{"POST", "/api/v1/jobs", `{"kind":"export","args":{"corpus":"c","service":"s","out":"/x","group_by":"year","severities":["error"]}}`, http.StatusUnprocessableEntity},
		{"POST", "/api/v1/jobs", `{"kind":"verify","bogus":1}`, http.StatusBadRequest},
		{"POST", "/api/v1/jobs", `{"kind":"verify","timeout_seconds":-1}`, http.StatusUnprocessableEntity},
		{"GET", "/api/v1/jobs/424242", "", http.StatusNotFound},
		{"GET", "/api/v1/jobs/x", "", http.StatusUnprocessableEntity},
		{"GET", "/api/v1/jobs?active=maybe", "", http.StatusUnprocessableEntity},
		{"POST", "/api/v1/jobs/424242/cancel", "", http.StatusNotFound},
	} {
		r := c.api(tc.method, tc.path, tc.body, "Authorization", bearer)
		require.Equal(t, tc.code, r.code, "%s %s: %s", tc.method, tc.path, r.body)
		require.NotEmpty(t, r.json["code"])
	}
	require.Equal(t, http.StatusUnauthorized, c.api("POST", "/api/v1/jobs", `{"kind":"verify"}`).code)
	var n int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM jobs`).Scan(&n))
	require.Zero(t, n, "no refused request enqueued a job")
}

// TestAPIImportAndExportJobs imports a list of entries and exports the corpus as jobs from the
// API, worked by a runner; the /jobs page lists them and cancels a queued one.
func TestAPIImportAndExportJobs(t *testing.T) {
	t.Parallel()
	reg := jobops.Registry("test")
	f := newFixture(t, web.Config{AdminToken: token, Jobs: reg})
	c := f.client()
	runner, err := jobs.NewRunner(jobs.Env{Base: f.base}, reg, jobs.Config{Beat: 100 * time.Millisecond, Name: "test"})
	require.NoError(t, err)
	require.NoError(t, runner.Start(context.Background()))
	defer runner.Stop()

	dir := t.TempDir()
	var list strings.Builder
	for i := range 50 {
		p := filepath.Join(dir, fmt.Sprintf("19%02d.%05d", 1+i%12, i), "source.zip")
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, zipOf(t, map[string]string{"main.tex": "x"}), 0o644))
		fmt.Fprintln(&list, p)
	}
	listFile := filepath.Join(t.TempDir(), "entries.txt")
	require.NoError(t, os.WriteFile(listFile, []byte(list.String()), 0o644))
	body, err := json.Marshal(map[string]any{"kind": "import", "args": map[string]any{"corpus": "arxiv", "service": "tex_to_html", "from_list": listFile, "batch": 7}})
	require.NoError(t, err)
	r := c.api("POST", "/api/v1/jobs", string(body), "Authorization", bearer)
	require.Equal(t, http.StatusAccepted, r.code, r.body)
	job := waitJob(t, c, int64(r.json["id"].(float64)))
	require.Equal(t, "completed", job["state"], job["error"])
	require.EqualValues(t, 50, job["done"])
	require.EqualValues(t, 50, job["total"])
	require.EqualValues(t, 50, job["result"].(map[string]any)["added"])
	var tasks int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE c.name = 'arxiv'`).Scan(&tasks))
	require.Equal(t, 50, tasks)

	// Results for each, then the export by month.
	f.exec(`UPDATE tasks t SET status = -1 FROM corpora c WHERE c.id = t.corpus_id AND c.name = 'arxiv'`)
	for _, line := range strings.Fields(list.String()) {
		require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(line), "tex_to_html.zip"), zipOf(t, map[string]string{"a.html": "<p>"}), 0o644))
	}
	out := filepath.Join(t.TempDir(), "export")
	body, err = json.Marshal(map[string]any{"kind": "export", "args": map[string]any{"corpus": "arxiv", "service": "tex_to_html",
		"out": out, "group_by": "month", "severities": []string{"no_problem"}, "html": true}})
	require.NoError(t, err)
	r = c.api("POST", "/api/v1/jobs", string(body), "Authorization", bearer)
	require.Equal(t, http.StatusAccepted, r.code, r.body)
	job = waitJob(t, c, int64(r.json["id"].(float64)))
	require.Equal(t, "completed", job["state"], job["error"])
	require.EqualValues(t, 12, job["result"].(map[string]any)["written"])
	zr, err := zip.OpenReader(filepath.Join(out, "arxiv_tex_to_html_2019-01.zip"))
	require.NoError(t, err)
	require.Len(t, zr.File, 5)
	require.NoError(t, zr.Close())

	// The lifecycle's steps as jobs: a second service activated from the entries known, then the
	// corpus deleted (an admin's job), leaving no orphan row.
	require.Equal(t, http.StatusOK, c.api("POST", "/api/v1/services", `{"name":"tex_to_pdf"}`, "Authorization", bearer).code)
	r = c.api("POST", "/api/v1/jobs", `{"kind":"activate","args":{"corpus":"arxiv","service":"tex_to_pdf"}}`, "Authorization", bearer)
	require.Equal(t, http.StatusAccepted, r.code, r.body)
	job = waitJob(t, c, int64(r.json["id"].(float64)))
	require.Equal(t, "completed", job["state"], job["error"])
	require.EqualValues(t, 50, job["result"].(map[string]any)["added"], job["result"])
	r = c.api("POST", "/api/v1/jobs", `{"kind":"delete_corpus","args":{"corpus":"arxiv"}}`, "Authorization", bearer)
	require.Equal(t, http.StatusAccepted, r.code, r.body)
	job = waitJob(t, c, int64(r.json["id"].(float64)))
	require.Equal(t, "completed", job["state"], job["error"])
	orphans, err := queuetest.Orphans(f.ctx, f.pool)
	require.NoError(t, err)
	require.Empty(t, orphans)
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE c.name = 'arxiv'`).Scan(&tasks))
	require.Zero(t, tasks)

	// The page lists them; its button cancels a job.
	require.Equal(t, http.StatusSeeOther, c.login(token).code)
	page := c.get("/jobs")
	require.Equal(t, http.StatusOK, page.code)
	require.Contains(t, page.body, "import")
	require.Contains(t, page.body, "export")
	id, err := jobs.Enqueue(f.ctx, f.pool, reg, jobs.Request{Kind: "verify", Args: json.RawMessage(`{"corpus":"arxiv","service":"tex_to_html"}`)})
	require.NoError(t, err)
	res := c.post("/jobs/cancel", url.Values{"job": {fmt.Sprint(id)}, "csrf": {c.csrf()}, "back": {"/jobs"}})
	require.Equal(t, http.StatusOK, res.code, res.body)
	require.Contains(t, res.body, fmt.Sprintf("job %d", id))
	j, err := jobs.Get(f.ctx, f.pool, id)
	require.NoError(t, err)
	require.True(t, j.CancelRequested)
}

// waitJob polls GET /api/v1/jobs/{id} until the job is finished (bounded).
func waitJob(t *testing.T, c *client, id int64) map[string]any {
	t.Helper()
	var last map[string]any
	for range 600 {
		r := c.api("GET", fmt.Sprintf("/api/v1/jobs/%d", id), "")
		require.Equal(t, http.StatusOK, r.code, r.body)
		last = r.json
		switch last["state"] {
		case "completed", "failed", "cancelled":
			return last
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("job %d not finished: %v", id, last)
	return nil
}
