package web_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/web"
)

// hostileLog is the attack of issue 37: a cortex.log of 1,100 lines of 4,000 '<', 7 KB zipped,
// 16.7 MB as HTML.
func hostileLog() string {
	var b strings.Builder
	for range 1100 {
		b.WriteString("Warning:latex:amp ")
		b.WriteString(strings.Repeat("<", 4000))
		b.WriteByte('\n')
	}
	return b.String()
}

// hostile makes task warn the hostile task: its result archive holds hostileLog, and it has the
// 1,001 messages of 2,000 '<' (task_messages.details holds 2,000 characters) a claim of that
// log stores.
func (f *fixture) hostile() {
	f.t.Helper()
	res := zipOf(f.t, map[string]string{"cortex.log": hostileLog()})
	require.Less(f.t, len(res), 10_000)
	require.NoError(f.t, os.WriteFile(filepath.Join(f.dir, "warn", "tex_to_html.zip"), res, 0o644))
	f.exec(`INSERT INTO task_messages (task_id, run, severity, category, what, details)
		SELECT $1, 1, 'warning', 'latex', 'amp', repeat('<', 2000) FROM generate_series(1, 1001)`, f.warn)
	f.exec(`INSERT INTO report_changes (task_id) VALUES ($1)`, f.warn)
	_, err := reports.New(f.pool, nil, nil).FoldAll(f.ctx, 0)
	require.NoError(f.t, err)
	// The statistics autovacuum soon gathers of the logs (not of message_kinds: a few rows, under
	// its threshold): with them the planner hashed the rows of the task page's messages, each
	// carrying the log's details (docs/web.md#bounded-work-issue-50).
	f.exec(`ANALYZE task_message_logs`)
}

// writeRecorder records the largest single write a handler makes, and the bytes written.
type writeRecorder struct {
	*httptest.ResponseRecorder
	largest int
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.largest = max(w.largest, len(p))
	return w.ResponseRecorder.Write(p)
}

// TestWebHostileResultPagesStayBounded serves the pages of the hostile task: the log page shows
// the log's first 500 lines and its last 20, each cut at 2 KiB of HTML with a marker, with a link
// to the whole log; message texts are clipped with their length noted, within the page's budget;
// every page stays under 4 MB and is written as it is made (in pieces of at most 32 KiB), not
// made whole in memory first.
func TestWebHostileResultPagesStayBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	f.hostile()
	srv, err := web.New(web.Config{Base: f.base, Store: f.store})
	require.NoError(t, err)
	paths := hostilePaths(f)
	for _, p := range paths {
		rec := &writeRecorder{ResponseRecorder: httptest.NewRecorder()}
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
		require.Equal(t, http.StatusOK, rec.Code, p)
		require.LessOrEqual(t, rec.Body.Len(), 4_000_000, p)
		// Written as made, through a 32 KiB buffer: never the whole page at once.
		require.LessOrEqual(t, rec.largest, 32<<10, "%s: written in pieces, not buffered whole", p)
		require.True(t, strings.HasSuffix(strings.TrimSpace(rec.Body.String()), "</html>"), "%s: a whole page", p)
	}
	logPage := f.client().get(paths[0].path).body
	require.LessOrEqual(t, len(logPage), 520*2100+16<<10, "520 lines of at most 2 KiB and the page around them")
	require.Contains(t, logPage, `id="log-cut"`)
	require.Contains(t, logPage, "4,420,900 bytes")
	require.Contains(t, logPage, "lines 501–1,080 are not shown; 520 lines are cut")
	require.Equal(t, 520, strings.Count(logPage, "… [cut: 4,018 bytes in all]"))
	require.Contains(t, logPage, fmt.Sprintf(`<a href="/task/%d/cortex.log" id="log-raw">download the whole log</a>`, f.warn))
	raw := f.client().get(fmt.Sprintf("/task/%d/cortex.log", f.warn))
	require.Equal(t, http.StatusOK, raw.code)
	require.Equal(t, hostileLog(), raw.body)
	require.Equal(t, "text/plain; charset=utf-8", raw.header.Get("Content-Type"))
	require.Contains(t, raw.header.Get("Content-Disposition"), "attachment")

	// The messages: the first 2 KiB of HTML each until the list has shown 512 KiB, then 256 bytes.
	// The task page lists the first 1,000 of the task's (its first is not hostile), the report's
	// page the 1,000 of its what.
	cut := map[string]int{"task": 999, "report_messages": 1000}
	for _, p := range paths[1:] {
		page := f.client().get(p.path).body
		require.Equal(t, cut[p.name], strings.Count(page, "… [cut: 2,000 bytes in all]"), p.name)
		require.Less(t, len(page), 1_200_000, p.name)
		require.NotContains(t, page, `class="late"`, p.name)
	}
}

// TestWebHostilePagesConcurrently: 60 requests at once of the hostile task's pages (its log, its
// page, the report's page of its messages) all answer, 200 or a deliberate 503 with Retry-After,
// most of them 200, every page under 4 MB; the cheap pages are made meanwhile (the log pages
// have slots of their own). The client's 10 s is the test's bound, far above what the server's
// own bounds give (3 s waiting for a slot, then 2 s of work).
func TestWebHostilePagesConcurrently(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	f.hostile()
	paths := hostilePaths(f)
	hc := *f.client().c
	hc.Timeout = 10 * time.Second
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	largest := 0
	start := time.Now()
	for i := range 60 {
		wg.Go(func() {
			resp, err := hc.Get(f.srv.URL + paths[i%len(paths)].path)
			if !assertNoErr(t, err) {
				return
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				assert.Equal(t, "2", resp.Header.Get("Retry-After"))
			}
			mu.Lock()
			codes[resp.StatusCode]++
			largest = max(largest, int(n))
			mu.Unlock()
		})
	}
	// Meanwhile the overview is made, in a slot the log pages do not take.
	for range 3 {
		resp, err := hc.Get(f.srv.URL + "/")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	wg.Wait()
	t.Logf("60 requests at once in %s: statuses %v", time.Since(start).Round(time.Millisecond), codes)
	require.LessOrEqual(t, largest, 4_000_000)
	require.Equal(t, 60, codes[http.StatusOK]+codes[http.StatusServiceUnavailable], "%v", codes)
	require.Greater(t, codes[http.StatusOK], 30, "%v", codes)
}

// TestWebPagePastItsDeadline: a page past its deadline answers 200 with what it has and a note:
// the task page without its messages, the log page without its lines, the report's page without
// its messages.
func TestWebPagePastItsDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	f.hostile()
	srv, err := web.New(web.Config{Base: f.base, Store: f.store, PageDeadline: time.Nanosecond})
	require.NoError(t, err)
	notes := map[string]string{"log": `id="log-late"`, "task": `id="messages-late"`, "report_messages": `id="messages-late"`}
	for _, p := range hostilePaths(f) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
		require.Equal(t, http.StatusOK, rec.Code, p.name)
		require.Contains(t, rec.Body.String(), notes[p.name], p.name)
		require.NotContains(t, rec.Body.String(), "… [cut:", p.name)
	}
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// blockingWriter holds a handler in its first write until released.
type blockingWriter struct {
	*httptest.ResponseRecorder
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started); <-w.release })
	return w.ResponseRecorder.Write(p)
}

// TestWebHeavyPagesWaitThenBusy: with every slot taken, a page waits HeavyWait and gets 503
// with Retry-After; sign-in, /live and static files still answer; once the slot is free pages
// are made again. The log pages' slots are apart: with them all taken the other pages are made,
// and the other way round.
func TestWebHeavyPagesWaitThenBusy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	srv, err := web.New(web.Config{Base: f.base, Store: f.store, AdminToken: token, HeavyLimit: 1, LogLimit: 1, HeavyWait: 50 * time.Millisecond})
	require.NoError(t, err)
	get := func(p string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		return rec
	}
	logPages := []string{fmt.Sprintf("/task/%d", f.ok), fmt.Sprintf("/task/%d/log", f.ok),
		"/report?corpus=papers&service=tex_to_html&severity=warning&category=undefined&what=cite"}
	cheap := []string{"/", "/report?corpus=papers&service=tex_to_html", "/workers"}
	for _, held := range []struct {
		path       string
		busy, made []string
	}{
		// A preview is written as read, in its slot (a shared page is written once made).
		{fmt.Sprintf("/task/%d/preview/index.html", f.ok), logPages, cheap},
		{"/runs?corpus=papers&service=tex_to_html", cheap, logPages},
	} {
		w := &blockingWriter{ResponseRecorder: httptest.NewRecorder(), started: make(chan struct{}), release: make(chan struct{})}
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, held.path, nil))
		}()
		<-w.started
		for _, p := range held.busy {
			r := get(p)
			require.Equal(t, http.StatusServiceUnavailable, r.Code, "%s while %s is made", p, held.path)
			require.Equal(t, "2", r.Header().Get("Retry-After"), p)
		}
		for _, p := range append(held.made, "/login", "/live", "/static/style.css") {
			require.Equal(t, http.StatusOK, get(p).Code, "%s while %s is made", p, held.path)
		}
		close(w.release)
		<-done
		require.Equal(t, http.StatusOK, w.Code)
		require.Equal(t, http.StatusOK, get(held.busy[0]).Code)
	}
}

// TestWebServerCutsSlowBodies: a POST /login whose body comes a byte at a time is cut at the
// server's ReadTimeout, before it is all sent; a body over 64 KiB is refused.
func TestWebServerCutsSlowBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	srv, err := web.New(web.Config{Base: f.base, Store: f.store, AdminToken: token, ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	hs := srv.HTTPServer()
	require.Equal(t, 300*time.Millisecond, hs.ReadTimeout)
	require.NotZero(t, hs.WriteTimeout)
	require.NotZero(t, hs.IdleTimeout)
	ts := httptest.NewUnstartedServer(srv)
	ts.Config = hs
	ts.Start()
	t.Cleanup(ts.Close)

	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	const bodyLen = 200 // 200 bytes at one every 50 ms: 10 s, far past the timeout
	_, err = fmt.Fprintf(conn, "POST /login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n",
		ts.Listener.Addr(), bodyLen)
	require.NoError(t, err)
	answered := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		answered <- string(b)
	}()
	sent := 0
	var reply string
send:
	for sent < bodyLen {
		select {
		case reply = <-answered:
			break send
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := conn.Write([]byte("t")); err != nil {
			break
		}
		sent++
	}
	if reply == "" {
		reply = <-answered
	}
	require.Less(t, sent, bodyLen, "the server waited for the whole slow body")
	require.True(t, strings.HasPrefix(reply, "HTTP/1.1 400") || reply == "", "cut with a 400 or a closed connection: %q", reply)

	big := url.Values{"token": {strings.Repeat("x", 100<<10)}}
	resp, err := http.PostForm(ts.URL+"/login", big)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(b), "request body too large")
}

// TestWebRefusesNonText: bytes that are not UTF-8, or a NUL, in a query or form value are a 400
// naming the parameter, and nothing is logged as an error.
func TestWebRefusesNonText(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelError}))
	f := newFixture(t, web.Config{AdminToken: token, Logger: logger})
	c := f.client()
	for _, tc := range []struct{ path, want string }{
		{"/report?corpus=%FF%FE&service=tex_to_html", "corpus: not UTF-8 text (byte 0xff at byte 0)"},
		{"/report?corpus=papers&service=tex_to_html&severity=fatal&category=a%00b", "category: holds a NUL byte (at byte 1)"},
		{"/runs?corpus=papers&service=%C3", "service: not UTF-8 text"},
		{"/runs/cell?corpus=papers&service=tex_to_html&from=%00", "from: holds a NUL byte"},
		{"/?x%FF=1", "parameter name: not UTF-8 text"},
		{fmt.Sprintf("/task/%d/preview/a%%FF.html", f.ok), "path: not UTF-8 text"},
	} {
		r := c.get(tc.path)
		require.Equal(t, http.StatusBadRequest, r.code, tc.path)
		require.Contains(t, r.body, tc.want, tc.path)
	}
	require.Equal(t, http.StatusSeeOther, c.login(token).code)
	csrf := c.csrf()
	for _, form := range []url.Values{
		{"corpus": {"papers"}, "service": {"tex_to_html"}, "severity": {"fatal"}, "category": {"a\x00b"}},
		{"corpus": {"papers\xff"}, "service": {"tex_to_html"}, "severity": {"fatal"}},
	} {
		form.Set("csrf", csrf)
		r := c.post("/rerun", form)
		require.Equal(t, http.StatusBadRequest, r.code, "%v: %s", form, r.body)
		require.Regexp(t, `(category: holds a NUL byte|corpus: not UTF-8 text)`, r.body)
	}
	r := f.client().post("/login", url.Values{"token": {"\xff"}})
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.body, "token: not UTF-8 text")
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, logged.String(), "nothing logged at error level")
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestWebLogoutFromAnotherOriginDoesNothing: a foreign page's form POST to /logout is refused
// and neither clears the cookie nor ends the session.
func TestWebLogoutFromAnotherOriginDoesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	require.Equal(t, http.StatusSeeOther, c.login(token).code)
	r := c.post("/logout", nil, "Origin", "http://evil.example")
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, "cross-origin request refused")
	require.Empty(t, r.header.Values("Set-Cookie"))
	require.Contains(t, c.get(pages(f)["report"]).body, `action="/rerun"`, "still signed in")
	r = c.post("/logout", nil, "Origin", f.srv.URL)
	require.Equal(t, http.StatusSeeOther, r.code)
	require.NotContains(t, c.get(pages(f)["report"]).body, `action="/rerun"`)
}

// TestWebSignInCannotLockOutTheAdmin: wrong tokens from many addresses use up the overall limit;
// then a wrong token from a fresh address gets 429, the right one signs in. An IPv6 client's
// /64 counts as one address.
func TestWebSignInCannotLockOutTheAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	srv, err := web.New(web.Config{Base: f.base, Store: f.store, AdminToken: token})
	require.NoError(t, err)
	srv.StopSignInClock() // the overall bucket refills one a 2 s: a slow run would see it
	login := func(addr, tok string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = net.JoinHostPort(addr, "40000")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	for i := range 50 {
		require.Equal(t, http.StatusForbidden, login(fmt.Sprintf("10.0.%d.%d", i/5, i%5), "wrong").Code, "failure %d", i+1)
	}
	r := login("10.9.9.9", "wrong")
	require.Equal(t, http.StatusTooManyRequests, r.Code, "the overall limit, for a wrong token")
	_, err = strconv.Atoi(r.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, http.StatusSeeOther, login("10.9.9.10", token).Code, "the right token still signs in")
	// Ten wrong tokens from addresses of one /64 lock that /64 out, not another.
	f2 := newFixture(t, web.Config{AdminToken: token})
	srv, err = web.New(web.Config{Base: f2.base, Store: f2.store, AdminToken: token})
	require.NoError(t, err)
	for i := range 10 {
		require.Equal(t, http.StatusForbidden, login(fmt.Sprintf("2001:db8::%x", i+1), "wrong").Code)
	}
	require.Equal(t, http.StatusTooManyRequests, login("2001:db8::ffff", token).Code, "the same /64")
	require.Equal(t, http.StatusSeeOther, login("2001:db8:0:1::1", token).Code, "another /64")
}

// TestWebPreviewIsolation: outside the task page's frame a preview is an attachment; a worker's
// script file is never served with a script type from the dashboard's origin; with a preview
// origin the task page frames it from there, the dashboard's host redirects to it, and the
// preview host serves nothing else.
func TestWebPreviewIsolation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	res := filepath.Join(f.dir, "ok", "tex_to_html.zip")
	require.NoError(t, os.WriteFile(res, zipOf(t, map[string]string{"cortex.log": "Status:conversion:0\n",
		"index.html": previewHTML, "x.js": "alert(1)", "m.mjs": "alert(1)", "fig.svg": "<svg/>"}), 0o644))
	srv, err := web.New(web.Config{Base: f.base, Store: f.store})
	require.NoError(t, err)
	get := func(s http.Handler, host, p string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, p, nil)
		req.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	index := fmt.Sprintf("/task/%d/preview/index.html", f.ok)
	for _, dest := range []string{"", "document"} {
		r := get(srv, "dash.example", index, "Sec-Fetch-Dest", dest)
		require.Equal(t, http.StatusOK, r.Code)
		require.Equal(t, "attachment", r.Header().Get("Content-Disposition"), "Sec-Fetch-Dest %q", dest)
	}
	for _, dest := range []string{"iframe", "image"} {
		r := get(srv, "dash.example", index, "Sec-Fetch-Dest", dest)
		require.Empty(t, r.Header().Get("Content-Disposition"), "Sec-Fetch-Dest %q", dest)
		require.Contains(t, r.Header().Get("Content-Type"), "text/html")
	}
	for _, m := range []string{"x.js", "m.mjs"} {
		r := get(srv, "dash.example", fmt.Sprintf("/task/%d/preview/%s", f.ok, m), "Sec-Fetch-Dest", "script")
		require.Equal(t, http.StatusOK, r.Code, m)
		require.Equal(t, "text/plain; charset=utf-8", r.Header().Get("Content-Type"), m)
		require.Equal(t, "nosniff", r.Header().Get("X-Content-Type-Options"))
	}
	require.Equal(t, "image/svg+xml", get(srv, "dash.example", fmt.Sprintf("/task/%d/preview/fig.svg", f.ok), "Sec-Fetch-Dest", "image").Header().Get("Content-Type"))

	_, err = web.New(web.Config{Base: f.base, Store: f.store, PreviewOrigin: "preview.example"})
	require.ErrorContains(t, err, "--preview-origin")
	sep, err := web.New(web.Config{Base: f.base, Store: f.store, PreviewOrigin: "https://preview.example/"})
	require.NoError(t, err)
	task := get(sep, "dash.example", fmt.Sprintf("/task/%d", f.ok))
	require.Equal(t, http.StatusOK, task.Code)
	require.Contains(t, task.Body.String(), fmt.Sprintf(`src="https://preview.example/task/%d/preview/index.html"`, f.ok))
	require.Contains(t, task.Header().Get("Content-Security-Policy"), "frame-src https://preview.example;")
	r := get(sep, "dash.example", index)
	require.Equal(t, http.StatusFound, r.Code)
	require.Equal(t, "https://preview.example"+index, r.Header().Get("Location"))
	r = get(sep, "preview.example", fmt.Sprintf("/task/%d/preview/x.js", f.ok), "Sec-Fetch-Dest", "script")
	require.Equal(t, http.StatusOK, r.Code)
	require.Contains(t, r.Header().Get("Content-Type"), "javascript", "its own origin serves a result's script as script")
	require.True(t, strings.HasPrefix(r.Header().Get("Content-Security-Policy"), "sandbox allow-scripts;"))
	for _, p := range []string{"/", "/workers", "/login"} {
		require.Equal(t, http.StatusNotFound, get(sep, "preview.example", p).Code, "%s on the preview host", p)
	}
}

// TestWebShowsBidiAndControlCharactersEscaped renders U+202E and other invisible or controlling
// characters in a corpus name, a message and a worker's name as their escapes, as the CLI does.
func TestWebShowsBidiAndControlCharactersEscaped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	f.exec(`INSERT INTO task_messages (task_id, run, severity, category, what, details) VALUES
		($1, 1, 'warning', 'bidi', 'gnp.exe'||chr(8238)||'txt', 'a'||chr(8206)||'b'||chr(8297)||'c'||chr(27)||'[2J'||chr(155))`, f.warn)
	f.exec(`UPDATE workers SET name = 'w'||chr(8238)||'evil'`)
	f.exec(`UPDATE attempts SET worker = 'w'||chr(8238)||'evil'`)
	c := f.client()
	for _, p := range []string{fmt.Sprintf("/task/%d", f.warn), fmt.Sprintf("/task/%d", f.ok), "/workers"} {
		body := c.get(p).body
		for _, r := range []string{"\u202e", "\u200e", "\u2069", "\x1b", "\u009b"} {
			require.NotContains(t, body, r, "%s: %q raw", p, r)
		}
	}
	require.Contains(t, c.get(fmt.Sprintf("/task/%d", f.warn)).body, `gnp.exe\u202etxt`)
	require.Contains(t, c.get(fmt.Sprintf("/task/%d", f.warn)).body, `a\u200eb\u2069c\x1b[2J\u009b`)
	require.Contains(t, c.get("/workers").body, `w\u202eevil`)
}
