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
	// The statistics autovacuum soon gathers: with them the planner hashed the rows of the task
	// page's messages, each carrying the log's details (12 s a page, docs/web.md#hostile-results).
	f.exec(`ANALYZE task_message_logs, message_kinds`)
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
// at most 1 MiB of HTML-escaped log with a link to the whole archive, message texts are clipped
// with their length noted, every page stays under 4 MB and is written as it is made (in pieces
// of at most 32 KiB, or the log's one text), not made whole in memory first; 60 requests at once
// all stay within it.
func TestWebHostileResultPagesStayBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	f.hostile()
	srv, err := web.New(web.Config{Base: f.base, Store: f.store})
	require.NoError(t, err)
	paths := []string{fmt.Sprintf("/task/%d/log", f.warn), fmt.Sprintf("/task/%d", f.warn),
		"/report?corpus=papers&service=tex_to_html&severity=warning&category=latex&what=amp&limit=1000"}
	for _, p := range paths {
		rec := &writeRecorder{ResponseRecorder: httptest.NewRecorder()}
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		require.Equal(t, http.StatusOK, rec.Code, p)
		require.LessOrEqual(t, rec.Body.Len(), 4_000_000, p)
		// Written as made, through a 32 KiB buffer: the largest write is a buffer, or the log
		// page's one escaped text (at most 1 MiB), never the whole page.
		limit := 32 << 10
		if strings.HasSuffix(p, "/log") {
			limit = 1 << 20
		}
		require.LessOrEqual(t, rec.largest, limit, "%s: written in pieces, not buffered whole", p)
		require.True(t, strings.HasSuffix(strings.TrimSpace(rec.Body.String()), "</html>"), "%s: a whole page", p)
	}
	logPage := f.client().get(paths[0])
	require.LessOrEqual(t, len(logPage.body), (1<<20)+16<<10, "the log's 1 MiB and the page around it")
	require.Contains(t, logPage.body, `id="log-cut"`)
	require.Contains(t, logPage.body, "of 4,420,900 bytes in all")
	require.Contains(t, logPage.body, fmt.Sprintf(`<a href="/task/%d/result">download the result archive</a>`, f.warn))
	task := f.client().get(paths[1]).body
	require.Contains(t, task, "… [cut: 2,000 bytes in all]")
	require.Contains(t, f.client().get(paths[2]).body, "… [cut: 2,000 bytes in all]")

	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	largest := 0
	// A heavy page takes about a second under the race detector alone; eight at once beside
	// the other packages' tests can pass the fixture client's 30 s, which is the harness's
	// bound, not the page's: these requests get two minutes (still bounded).
	hc := *f.client().c
	hc.Timeout = 2 * time.Minute
	for i := range 60 {
		wg.Go(func() {
			resp, err := hc.Get(f.srv.URL + paths[i%len(paths)])
			if !assertNoErr(t, err) {
				return
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			largest = max(largest, int(n))
			mu.Unlock()
		})
	}
	wg.Wait()
	require.LessOrEqual(t, largest, 4_000_000)
	require.Equal(t, 60, codes[http.StatusOK]+codes[http.StatusServiceUnavailable], "%v", codes)
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
// are made again.
func TestWebHeavyPagesWaitThenBusy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	srv, err := web.New(web.Config{Base: f.base, Store: f.store, AdminToken: token, HeavyLimit: 1, HeavyWait: 50 * time.Millisecond})
	require.NoError(t, err)
	held := &blockingWriter{ResponseRecorder: httptest.NewRecorder(), started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeHTTP(held, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/task/%d/log", f.ok), nil))
	}()
	<-held.started
	get := func(p string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		return rec
	}
	for _, p := range []string{"/", fmt.Sprintf("/task/%d", f.ok), fmt.Sprintf("/task/%d/preview/index.html", f.ok)} {
		r := get(p)
		require.Equal(t, http.StatusServiceUnavailable, r.Code, p)
		require.Equal(t, "2", r.Header().Get("Retry-After"), p)
	}
	for _, p := range []string{"/login", "/live", "/static/style.css"} {
		require.Equal(t, http.StatusOK, get(p).Code, p)
	}
	close(held.release)
	<-done
	require.Equal(t, http.StatusOK, held.Code)
	require.Equal(t, http.StatusOK, get("/").Code)
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
