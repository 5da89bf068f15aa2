package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/dispatch"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/web"
	"github.com/cortexq/cortexq/worker"
)

// The browser tests drive a real headless Chromium (Debian's chromium, which
// scripts/install-deps installs; $CORTEXQ_CHROMIUM names another binary). Without one they
// fail: they never skip. Screenshots of each page (1280×800) go to $CORTEXQ_ARTIFACTS, or
// testdata/artifacts (git-ignored).

func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CORTEXQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: run scripts/install-deps (apt-get install chromium), or set CORTEXQ_CHROMIUM")
	return ""
}

func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CORTEXQ_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// browser is one headless Chromium tab and what its pages reported: console errors, uncaught
// exceptions, browser log entries of level error (CSP violations among them) and dialogs
// (an alert a hostile message would open).
type browser struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	bad []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx}
	// The first action starts the browser and the tab; the subscriptions follow it.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)))
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.report(fmt.Sprintf("%s %s:%d", m, m.URL, m.Line+1))
			}
		}
	}()
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.report("dialog: " + ev.Message)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	}()
	return b
}

func (b *browser) report(msg string) {
	b.mu.Lock()
	b.bad = append(b.bad, msg)
	b.mu.Unlock()
}

// do runs actions in the tab, each bounded.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...))
}

// value runs one action that returns a value.
func value[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(b.t, err)
	return v
}

// problems returns and clears what the pages reported.
func (b *browser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.bad
	b.bad = nil
	return out
}

// load opens url, waits for the page and a moment for its script, and checks that it reported
// nothing.
func (b *browser) load(url string) {
	b.t.Helper()
	b.do(chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body")), chromedp.Sleep(300*time.Millisecond))
	require.Empty(b.t, b.problems(), "the page %s reported errors", url)
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	png := value(b, chromedp.CaptureScreenshot())
	require.NoError(b.t, os.WriteFile(filepath.Join(artifactsDir(b.t), name+".png"), png, 0o644))
}

// signIn signs the browser in through the sign-in form.
func (b *browser) signIn(base string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), token), chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/logout"]`)))
	require.Empty(b.t, b.problems())
}

// TestBrowserPagesLoadWithoutErrors opens every page, signed out and in, in Chromium: no console
// error, no exception, no CSP violation. It saves a screenshot of each.
func TestBrowserPagesLoadWithoutErrors(t *testing.T) {
	f := newFixture(t, web.Config{AdminToken: token})
	b := newBrowser(t)
	for name, path := range pages(f) {
		b.load(f.srv.URL + path)
		b.screenshot("web-" + name)
	}
	b.signIn(f.srv.URL)
	for _, name := range []string{"overview", "report", "severity", "task-ok"} {
		b.load(f.srv.URL + pages(f)[name])
		b.screenshot("web-admin-" + name)
	}
	// A diff of two runs: rerun the fatal slice, then compare run 1 with the current one.
	_, err := f.store.Rerun(f.ctx, lease.RerunScope{CorpusID: 1, ServiceID: 1, Statuses: nil, Severity: "fatal", Category: "latex"})
	require.NoError(t, err)
	var run int64
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT min(id) FROM runs`).Scan(&run))
	b.load(fmt.Sprintf("%s/runs?corpus=papers&service=tex_to_html&from=%d&to=current", f.srv.URL, run))
	b.screenshot("web-runs-diff")
	cells := value(b, chromedp.Evaluate[int](`document.querySelectorAll("table.matrix a").length`))
	require.Positive(t, cells, "the diff matrix links its cells")
	href := value(b, chromedp.Evaluate[string](`document.querySelector("table.matrix a").getAttribute("href")`))
	b.load(f.srv.URL + href)
	b.screenshot("web-diff-cell")
}

// TestBrowserRendersHostileMessagesInert opens the pages that show a worker's hostile message
// and identity: no dialog, no injected element, the text shown as text.
func TestBrowserRendersHostileMessagesInert(t *testing.T) {
	f := newFixture(t, web.Config{AdminToken: token})
	b := newBrowser(t)
	for _, name := range []string{"what", "task", "workers", "log", "category"} {
		b.load(f.srv.URL + pages(f)[name])
		injected := value(b, chromedp.Evaluate[int](`document.querySelectorAll('img[src="x"], img[onerror], script:not([src="/static/live.js"])').length`))
		require.Zero(t, injected, "%s: an element from a worker's message made it into the DOM", name)
	}
	b.load(f.srv.URL + pages(f)["what"])
	text := value(b, chromedp.TextContent(chromedp.CSS(`td.details`)))
	require.Equal(t, xssAttr+" "+xssScript, text)
	require.Empty(t, b.problems())
}

// TestBrowserRerunFromReportPage signs in, clicks the report's rerun button for the fatal slice,
// sees the count on the confirmation step (nothing changed yet), confirms, and sees the task go
// back to TODO.
func TestBrowserRerunFromReportPage(t *testing.T) {
	f := newFixture(t, web.Config{AdminToken: token})
	b := newBrowser(t)
	b.load(f.srv.URL + pages(f)["severity"])
	buttons := value(b, chromedp.Evaluate[int](`document.querySelectorAll('form[action="/rerun"]').length`))
	require.Zero(t, buttons, "no button before signing in")
	b.signIn(f.srv.URL)
	b.load(f.srv.URL + pages(f)["severity"])
	b.do(chromedp.Click(chromedp.CSS(`.slice-actions form[action="/rerun"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.done`)))
	ask := value(b, chromedp.TextContent(chromedp.CSS(`p.done`)))
	require.Contains(t, ask, "1 task would go back to TODO")
	require.NotEqual(t, 0, f.status(f.bad), "the confirmation step changes nothing")
	b.do(chromedp.Click(chromedp.CSS(`main form[action="/rerun"] button`)),
		chromedp.WaitNotPresent(chromedp.CSS(`main form[action="/rerun"]`)), chromedp.WaitVisible(chromedp.CSS(`p.done`)))
	done := value(b, chromedp.TextContent(chromedp.CSS(`p.done`)))
	require.Contains(t, done, "1 task back to TODO")
	require.Empty(t, b.problems())
	require.Equal(t, 0, f.status(f.bad))
	b.load(fmt.Sprintf("%s/task/%d", f.srv.URL, f.bad))
	status := value(b, chromedp.TextContent(chromedp.CSS(`#task-status`)))
	require.Equal(t, "todo", status)
}

// TestBrowserPreviewCannotReadCookies opens the task page with its preview frame, signed in and
// with a script-readable cookie of the dashboard's origin set: the preview's own script finds
// document.cookie and its parent's closed to it, and reports so to /probe.
func TestBrowserPreviewCannotReadCookies(t *testing.T) {
	f := newFixture(t, web.Config{AdminToken: token})
	probes := make(chan url.Values, 4)
	inner := f.srv.Config.Handler
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/probe" {
			probes <- r.URL.Query()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		inner.ServeHTTP(w, r)
	})
	b := newBrowser(t)
	b.signIn(f.srv.URL)
	u, err := url.Parse(f.srv.URL)
	require.NoError(t, err)
	_, err = chromedp.Call(b.ctx, network.SetCookie, network.SetCookieParams{Name: "visible", Value: "dashboard-secret",
		Domain: u.Hostname(), Path: "/"})
	require.NoError(t, err)
	b.do(chromedp.Navigate(fmt.Sprintf("%s/task/%d", f.srv.URL, f.ok)), chromedp.WaitReady(chromedp.CSS("iframe.preview")))
	top := value(b, chromedp.Evaluate[string](`document.cookie`))
	require.Contains(t, top, "visible=dashboard-secret", "the dashboard's own page reads the cookie")
	select {
	case q := <-probes:
		require.NotContains(t, q.Get("c"), "dashboard-secret")
		require.NotContains(t, q.Get("c"), web.SessionCookie)
		require.True(t, q.Get("c") == "cookie:" || strings.HasPrefix(q.Get("c"), "threw:"), "document.cookie in the frame: %q", q.Get("c"))
		require.True(t, strings.HasPrefix(q.Get("p"), "parentthrew:"), "the parent's cookie from the frame: %q", q.Get("p"))
	case <-time.After(30 * time.Second):
		t.Fatal("the preview's script never reported")
	}
	b.screenshot("web-task-preview")
}

// TestBrowserOverviewUpdatesLive opens the overview, then starts a replica and echo workers:
// the page's figures follow the tasks as they drain, without a reload.
func TestBrowserOverviewUpdatesLive(t *testing.T) {
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	store := lease.New(pool, lease.Config{Replica: "web-live", LeaseTimeout: 30 * time.Second})
	cat := catalog.New(pool, nil)
	svc, err := cat.AddService(ctx, "echo", 0)
	require.NoError(t, err)
	dir := t.TempDir()
	const n = 150
	var entries []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("%03d", i), "source.zip")
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, zipOf(t, map[string]string{"main.tex": fmt.Sprint(i),
			"cortex.log": fmt.Sprintf("Info:cortex:sample %d\nStatus:conversion:0\n", i)}), 0o644))
		entries = append(entries, p)
	}
	_, err = cat.Import(ctx, catalog.ImportRequest{Corpus: "live", CorpusPath: dir, ServiceID: svc.ID, Entries: entries})
	require.NoError(t, err)
	// The live figures' budget is raised: one read slowed by a loaded machine (162 ms under
	// -race in CI) would otherwise stretch the next one past the test's minute (readEvery).
	srv, err := web.New(web.Config{Base: base.New(pool, nil, nil), Store: store, LiveBudget: 500 * time.Millisecond})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	b := newBrowser(t)
	b.load(hs.URL + "/")
	read := func() (string, string) {
		return value(b, chromedp.TextContent(chromedp.CSS(`tr[data-row] [data-k="NoProblem"]`))),
			value(b, chromedp.TextContent(chromedp.CSS(`tr[data-row] [data-k="Tasks"]`)))
	}
	done, tasks := read()
	require.Equal(t, "0", done)
	require.Equal(t, "150", tasks)

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	root := base.New(pool, nil, nil)
	ds, err := dispatch.New(dispatch.Deps{Store: store, Catalog: root.Catalog, Keys: root.Allowlist, ConnConfig: pool.Config().ConnConfig}, dispatch.Config{VentilatorAddr: "tcp://127.0.0.1:*", SinkAddr: "tcp://127.0.0.1:*", SyncArchives: true})
	require.NoError(t, err)
	srvDone := make(chan error, 1)
	go func() { srvDone <- ds.Run(rctx) }()
	vent, sink, err := ds.Endpoints(rctx)
	require.NoError(t, err)
	wDone := make(chan error, 1)
	go func() {
		wDone <- worker.Run(rctx, worker.Config{Ventilator: vent, Sink: sink, Service: "echo", Identity: "live-echo",
			Concurrency: 2, Throttle: 20 * time.Millisecond, IOTimeout: 30 * time.Second, Backoff: 100 * time.Millisecond}, worker.Echo{})
	}()
	seen := map[string]bool{}
	deadline := time.Now().Add(time.Minute)
	for done != "150" {
		if !time.Now().Before(deadline) {
			ps, err := inspect.New(pool, nil).Progress(ctx, "live", "echo")
			require.NoError(t, err)
			lr, err := http.Get(hs.URL + "/live")
			require.NoError(t, err)
			lb, _ := io.ReadAll(lr.Body)
			lr.Body.Close()
			t.Fatalf("the overview still shows %s of 150 done (seen %v); the database: %+v; /live: %s", done, seen, ps, lb)
		}
		time.Sleep(500 * time.Millisecond)
		done, _ = read()
		seen[done] = true
	}
	live := value(b, chromedp.TextContent(chromedp.CSS(`#live-at`)))
	require.Contains(t, live, "live")
	// The replicas' table follows too: the replica appeared after the page was drawn. It has a
	// minute of its own: under a loaded CI the tasks above took most of theirs.
	deadline = time.Now().Add(time.Minute)
	for replicas := ""; !strings.Contains(replicas, "web-live"); {
		require.True(t, time.Now().Before(deadline), "the replicas' table shows %q", replicas)
		time.Sleep(500 * time.Millisecond)
		replicas = value(b, chromedp.TextContent(chromedp.CSS(`#replicas tbody`)))
	}
	require.Empty(t, b.problems())
	b.screenshot("web-overview-live")
	cancel()
	require.NoError(t, <-srvDone, "the replica stops cleanly")
	if err := <-wDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("echo workers: %v", err)
	}
}

// TestBrowserPagesFit1400AndReadErrors opens every page at 1,400 px, signed out and in: none is
// wider than the window. On the task page the infos are folded until their summary is clicked;
// the navigation's search box takes a task id to its page.
func TestBrowserPagesFit1400AndReadErrors(t *testing.T) {
	f := newFixture(t, web.Config{AdminToken: token})
	f.exec(`INSERT INTO task_messages (task_id, run, severity, category, what, details)
		SELECT $1, 1, 'info', 'loaded_file', 'pkg' || i || '.sty', '' FROM generate_series(1, 40) i`, f.bad)
	b := newBrowser(t)
	b.do(chromedp.EmulateViewport(1400, 900))
	fits := func(signedIn bool) {
		for name, path := range pages(f) {
			b.load(f.srv.URL + path)
			w := value(b, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
			require.LessOrEqual(t, w, 1400, "%s (signed in %v) is %d px wide", name, signedIn, w)
		}
	}
	fits(false)
	b.signIn(f.srv.URL)
	fits(true)

	b.load(fmt.Sprintf("%s/task/%d", f.srv.URL, f.bad))
	open := value(b, chromedp.Evaluate[bool](`document.querySelector("details.infos").open`))
	require.False(t, open, "the infos are folded")
	visible := value(b, chromedp.Evaluate[bool](`document.querySelector("details.infos table").checkVisibility()`))
	require.False(t, visible, "the folded infos are not shown")
	summary := value(b, chromedp.TextContent(chromedp.CSS(`details.infos summary`)))
	require.Equal(t, "40 infos", summary)
	first := value(b, chromedp.TextContent(chromedp.CSS(`#problems tbody tr td .sev`)))
	require.Equal(t, "fatal", first)
	b.do(chromedp.Click(chromedp.CSS(`details.infos summary`)))
	open = value(b, chromedp.Evaluate[bool](`document.querySelector("details.infos").open`))
	require.True(t, open, "a click unfolds them")
	visible = value(b, chromedp.Evaluate[bool](`document.querySelector("details.infos table").checkVisibility()`))
	require.True(t, visible)
	b.screenshot("web-task-errors")

	b.do(chromedp.SendKeys(chromedp.CSS(`nav input[name="q"]`), fmt.Sprintf("%d\n", f.warn)),
		chromedp.WaitVisible(chromedp.CSS(`#task-status`)))
	status := value(b, chromedp.TextContent(chromedp.CSS(`#task-status`)))
	require.Equal(t, "warning", status)
	require.Empty(t, b.problems())
}
