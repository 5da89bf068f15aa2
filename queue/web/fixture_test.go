package web_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/web"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// Hostile strings a worker may send, in messages, identities and entries.
const (
	xssScript = `<script>alert(1)</script>`
	xssAttr   = `"><img src=x onerror=alert(1)>`
	token     = "test-admin-token-0123456789"
)

// fixture is a database with one corpus "papers" of service tex_to_html: task ok (no_problem,
// with a result archive holding cortex.log and index.html), task bad (fatal, with hostile
// messages and a hostile worker), task warn (warning) and task todo.
type fixture struct {
	t                   testing.TB
	ctx                 context.Context
	pool                *pgxpool.Pool
	base                *base.Base
	store               *lease.Store
	dir                 string
	ok, bad, warn, todo int64
	srv                 *httptest.Server
	web                 *web.Server
}

func newFixture(t testing.TB, cfg web.Config) *fixture {
	t.Helper()
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	b := base.New(pool, nil, nil)
	f := &fixture{t: t, ctx: ctx, pool: pool, base: b, store: b.Lease(lease.Config{Replica: "r1"}), dir: t.TempDir()}
	cat := catalog.New(pool, nil)
	svc, err := cat.AddService(ctx, "tex_to_html", 0)
	require.NoError(t, err)
	var entries []string
	for _, name := range []string{"ok", "bad", "warn", "todo"} {
		p := filepath.Join(f.dir, name, "source.zip")
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, zipOf(t, map[string]string{"main.tex": "\\documentclass{article} " + name}), 0o644))
		entries = append(entries, p)
	}
	_, err = cat.Import(ctx, catalog.ImportRequest{Corpus: "papers", CorpusPath: f.dir, ServiceID: svc.ID, Entries: entries})
	require.NoError(t, err)
	id := func(name string) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM tasks WHERE entry = $1`, filepath.Join(f.dir, name, "source.zip")).Scan(&id))
		return id
	}
	f.ok, f.bad, f.warn, f.todo = id("ok"), id("bad"), id("warn"), id("todo")
	f.exec(`UPDATE tasks SET status = -1 WHERE id = $1`, f.ok)
	f.exec(`UPDATE tasks SET status = -4 WHERE id = $1`, f.bad)
	f.exec(`UPDATE tasks SET status = -2 WHERE id = $1`, f.warn)
	f.exec(`INSERT INTO task_messages (task_id, run, severity, category, what, details) VALUES
		($1, 1, 'fatal', 'latex', $2, $3), ($4, 1, 'warning', 'undefined', 'cite', 'no \cite target')`,
		f.bad, "what"+xssScript, xssAttr+" "+xssScript, f.warn)
	// Written behind the write paths' backs: noted and folded for the report's rollups.
	f.exec(`INSERT INTO report_changes (task_id) SELECT id FROM tasks`)
	_, err = reports.New(pool, nil, nil).FoldAll(ctx, 0)
	require.NoError(t, err)
	f.exec(`INSERT INTO workers (name, service_id, last_request, last_result, dispatched, results) VALUES ($1, $2, now(), now(), 2, 2)`,
		"worker"+xssAttr, svc.ID)
	f.exec(`INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, answered_at, outcome, status) VALUES
		($1, 1, 0, $3, 'r1', now() - interval '3 seconds', now() - interval '1 second', 'accepted', -1),
		($2, 1, 0, $3, 'r1', now() - interval '2 seconds', now(), 'accepted', -4)`, f.ok, f.bad, "worker"+xssAttr)
	res := filepath.Join(f.dir, "ok", "tex_to_html.zip")
	require.NoError(t, os.WriteFile(res, zipOf(t, map[string]string{
		"cortex.log": "Info:cortex:ok converted " + xssScript + "\nStatus:conversion:0\n",
		"index.html": previewHTML,
	}), 0o644))
	if cfg.Store == nil {
		cfg.Base, cfg.Store = f.base, f.store
	}
	if cfg.Logger == nil && os.Getenv("WEBDEBUG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	// Passkeys on localhost: the origin names the port, so the listener comes first.
	var ln net.Listener
	if cfg.PasskeyRPID == "localhost" && len(cfg.PasskeyOrigins) == 0 {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		cfg.PasskeyOrigins = []string{fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)}
	}
	srv, err := web.New(cfg)
	require.NoError(t, err)
	f.srv = httptest.NewUnstartedServer(srv)
	if ln != nil {
		require.NoError(t, f.srv.Listener.Close())
		f.srv.Listener = ln
	}
	f.web = srv
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

// previewHTML is the result page: its script reports what document.cookie gives it, or the
// error reading it throws, to /probe (which only the browser tests serve).
const previewHTML = `<!doctype html><html><head><title>paper</title></head><body><p id="p">A converted paper.</p>
<script>
var c;
try { c = "cookie:" + document.cookie; } catch (e) { c = "threw:" + e.name; }
var p;
try { p = "parent:" + parent.document.cookie; } catch (e) { p = "parentthrew:" + e.name; }
document.getElementById("p").textContent = c + " " + p;
new Image().src = "/probe?c=" + encodeURIComponent(c) + "&p=" + encodeURIComponent(p);
</script></body></html>`

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	_, err := f.pool.Exec(f.ctx, sql, args...)
	require.NoError(f.t, err, sql)
}

func (f *fixture) status(id int64) int {
	f.t.Helper()
	var st int
	require.NoError(f.t, f.pool.QueryRow(f.ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&st))
	return st
}

func zipOf(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		require.NoError(t, err)
		_, err = w.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// client is a browser-like client of the fixture's server, with a cookie jar; it follows no
// redirect, so tests see them.
type client struct {
	f *fixture
	c *http.Client
}

func (f *fixture) client() *client {
	jar, err := cookiejar.New(nil)
	require.NoError(f.t, err)
	return &client{f: f, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type response struct {
	code   int
	header http.Header
	body   string
}

func (c *client) get(path string) response {
	c.f.t.Helper()
	resp, err := c.c.Get(c.f.srv.URL + path)
	require.NoError(c.f.t, err)
	return read(c.f.t, resp)
}

func (c *client) post(path string, form url.Values, header ...string) response {
	c.f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.f.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(c.f.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.c.Do(req)
	require.NoError(c.f.t, err)
	return read(c.f.t, resp)
}

func read(t testing.TB, resp *http.Response) response {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{resp.StatusCode, resp.Header, string(b)}
}

// login signs the client in with tok.
func (c *client) login(tok string) response {
	c.f.t.Helper()
	return c.post("/login", url.Values{"token": {tok}})
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page's forms.
func (c *client) csrf() string {
	c.f.t.Helper()
	r := c.get("/report?corpus=papers&service=tex_to_html")
	m := csrfField.FindStringSubmatch(r.body)
	require.NotNil(c.f.t, m, "no csrf field on the report page of a signed-in client")
	return m[1]
}
