package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/web"
)

// pages are every page of the fixture, by name.
func pages(f *fixture) map[string]string {
	return map[string]string{
		"overview": "/",
		"report":   "/report?corpus=papers&service=tex_to_html",
		"severity": "/report?corpus=papers&service=tex_to_html&severity=fatal",
		"category": "/report?corpus=papers&service=tex_to_html&severity=fatal&category=latex",
		"what":     "/report?corpus=papers&service=tex_to_html&severity=fatal&category=latex&what=" + url.QueryEscape("what"+xssScript),
		"task":     fmt.Sprintf("/task/%d", f.bad),
		"task-ok":  fmt.Sprintf("/task/%d", f.ok),
		"log":      fmt.Sprintf("/task/%d/log", f.ok),
		"runs":     "/runs?corpus=papers&service=tex_to_html",
		"time":     "/runs/time?corpus=papers&service=tex_to_html",
		"workers":  "/workers",
		"login":    "/login",
		"search":   "/search?q=source",
		"dead":     "/dead",
		"attempts": "/workers/attempts?worker=" + url.QueryEscape("worker"+xssAttr),
		"file":     fmt.Sprintf("/task/%d/file?name=main.tex", f.bad),
		"view":     fmt.Sprintf("/task/%d/view", f.ok),
	}
}

// TestWebPagesRenderWithStrictHeaders loads every page: 200, the strict CSP and nosniff, no
// buttons without a session.
func TestWebPagesRenderWithStrictHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	for name, path := range pages(f) {
		r := c.get(path)
		require.Equal(t, http.StatusOK, r.code, "%s: %s", name, r.body)
		csp := r.header.Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self'", name)
		require.Contains(t, csp, "frame-ancestors 'none'", name)
		require.NotContains(t, csp, "unsafe-inline", name)
		require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"), name)
		require.NotContains(t, r.body, `action="/rerun"`, "%s: a button without a session", name)
		require.NotContains(t, r.body, `name="csrf"`, name)
		require.NotContains(t, r.body, "<script>", "%s: an inline script", name)
		require.NotContains(t, r.body, " style=", "%s: an inline style", name)
	}
	require.Contains(t, c.get("/").body, `<progress max="4" value="3"`)
	require.Contains(t, c.get("/").body, `<polyline data-k="Spark" points="`)
	report := c.get(pages(f)["report"]).body
	require.Contains(t, report, `severity=fatal">fatal</a></td><td>1</td><td>1</td><td>25.0%</td>`, "one fatal task of the four not Invalid, with its one fatal message")
	require.Contains(t, c.get(pages(f)["task-ok"]).body, `sandbox="allow-scripts"`)
	require.Contains(t, c.get(pages(f)["log"]).body, "Info:cortex:ok converted")
	live := c.get("/live")
	require.Equal(t, http.StatusOK, live.code)
	require.Equal(t, "application/json", live.header.Get("Content-Type"))
	require.Contains(t, live.body, `"Done":3`)
	st := c.get("/static/live.js")
	require.Equal(t, http.StatusOK, st.code)
	require.Contains(t, st.header.Get("Content-Type"), "javascript")
}

// TestWebEscapesWorkerData renders hostile messages, entries and worker names escaped.
func TestWebEscapesWorkerData(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	for _, name := range []string{"category", "what", "task", "task-ok", "log", "workers", "severity"} {
		r := c.get(pages(f)[name])
		require.Equal(t, http.StatusOK, r.code, name)
		require.NotContains(t, r.body, xssScript, name)
		require.NotContains(t, r.body, `<img src=x`, name)
		require.NotContains(t, r.body, `<script>alert`, name)
	}
	require.Contains(t, c.get(pages(f)["what"]).body, "&#34;&gt;&lt;img src=x onerror=alert(1)&gt; &lt;script&gt;alert(1)&lt;/script&gt;")
	require.Contains(t, c.get(pages(f)["task"]).body, "what&lt;script&gt;alert(1)&lt;/script&gt;")
	require.Contains(t, c.get(pages(f)["workers"]).body, "worker&#34;&gt;&lt;img src=x onerror=alert(1)&gt;")
}

// TestWebBadInput answers bad parameters with 400 and a message saying what is wrong.
func TestWebBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	for _, tc := range []struct{ path, want string }{
		{"/report", "corpus and service are required"},
		{"/report?corpus=papers&service=tex_to_html&limit=abc", `limit &#34;abc&#34;: want a whole number from 1 to 1000`},
		{"/report?corpus=papers&service=tex_to_html&limit=1001", "want a whole number from 1 to 1000"},
		{"/report?corpus=papers&service=tex_to_html&offset=100001", "want a whole number from 0 to 100000"},
		{"/report?corpus=papers&service=tex_to_html&severity=bad", `severity &#34;bad&#34;: want one of error, fatal, invalid, no_problem, warning`},
		{"/report?corpus=papers&service=tex_to_html&category=x", "category needs a severity"},
		{"/report?corpus=papers&service=tex_to_html&severity=fatal&what=x", "what needs a category"},
		{"/task/abc", `task id &#34;abc&#34;: want a positive number`},
		{"/task/-1", "want a positive number"},
		{"/runs?corpus=papers&service=tex_to_html&from=abc", "want a run id"},
		{"/runs?corpus=papers&service=tex_to_html&from=999", "not a closed run of this corpus and service"},
		{"/runs/cell?corpus=papers&service=tex_to_html&from=x&ts=-1", "want a run id"},
	} {
		r := c.get(tc.path)
		require.Equal(t, http.StatusBadRequest, r.code, tc.path)
		require.Contains(t, r.body, tc.want, tc.path)
	}
	for _, path := range []string{"/report?corpus=nope&service=tex_to_html", "/task/999999", "/task/999999/source",
		fmt.Sprintf("/task/%d/result", f.todo), fmt.Sprintf("/task/%d/log", f.todo), fmt.Sprintf("/task/%d/preview/index.html", f.todo),
		fmt.Sprintf("/task/%d/preview/nothere.html", f.ok)} {
		r := c.get(path)
		require.Equal(t, http.StatusNotFound, r.code, path)
	}
	r := c.get(fmt.Sprintf("/task/%d/preview/a/../../x", f.ok))
	require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound, http.StatusMovedPermanently, http.StatusTemporaryRedirect}, r.code)
}

// TestWebArchivesAndSandboxedPreview downloads the archives and checks that the preview is
// served with CSP sandbox (an opaque origin) and can be framed by the dashboard only.
func TestWebArchivesAndSandboxedPreview(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	src := c.get(fmt.Sprintf("/task/%d/source", f.ok))
	require.Equal(t, http.StatusOK, src.code)
	want, err := os.ReadFile(filepath.Join(f.dir, "ok", "source.zip"))
	require.NoError(t, err)
	require.Equal(t, string(want), src.body)
	require.Contains(t, src.header.Get("Content-Disposition"), "attachment")
	res := c.get(fmt.Sprintf("/task/%d/result", f.ok))
	require.Equal(t, http.StatusOK, res.code)
	require.Equal(t, "application/zip", res.header.Get("Content-Type"))

	p := c.get(fmt.Sprintf("/task/%d/preview/index.html", f.ok))
	require.Equal(t, http.StatusOK, p.code)
	csp := p.header.Get("Content-Security-Policy")
	require.True(t, strings.HasPrefix(csp, "sandbox allow-scripts;"), csp)
	require.NotContains(t, csp, "allow-same-origin")
	require.Contains(t, csp, "frame-ancestors 'self'")
	require.Equal(t, "nosniff", p.header.Get("X-Content-Type-Options"))
	require.Contains(t, p.header.Get("Content-Type"), "text/html")
	require.Equal(t, http.StatusBadRequest, c.get(fmt.Sprintf("/task/%d/preview/", f.ok)).code)
}

// TestWebSignIn checks the sign-in: token missing, wrong, right; the cookie's attributes.
func TestWebSignIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	r := c.login("")
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.body, "give a token")
	r = c.login("wrong-token")
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, "wrong token")
	require.Empty(t, r.header.Values("Set-Cookie"))
	r = c.login(token[:len(token)-1])
	require.Equal(t, http.StatusForbidden, r.code, "a prefix of the token")
	r = c.login(token)
	require.Equal(t, http.StatusSeeOther, r.code)
	cookie := r.header.Get("Set-Cookie")
	require.Contains(t, cookie, web.SessionCookie+"=")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Strict")
	require.Contains(t, c.get(pages(f)["report"]).body, `action="/rerun"`, "the buttons once signed in")
	require.Contains(t, c.get("/").body, `action="/pause"`)
	// A forged or tampered cookie is no session.
	forged := f.client()
	u, _ := url.Parse(f.srv.URL)
	forged.c.Jar.SetCookies(u, []*http.Cookie{{Name: web.SessionCookie, Value: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}})
	require.NotContains(t, forged.get(pages(f)["report"]).body, `action="/rerun"`)
	// Signing out ends it.
	require.Equal(t, http.StatusSeeOther, c.post("/logout", nil).code)
	require.NotContains(t, c.get(pages(f)["report"]).body, `action="/rerun"`)
}

// TestWebActionsNeedSessionAndCSRF tries each action without a session, with the session but
// no or a wrong CSRF token, from another origin, and rightly; and with bad input.
func TestWebActionsNeedSessionAndCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	anon := f.client()
	admin := f.client()
	require.Equal(t, http.StatusSeeOther, admin.login(token).code)
	csrf := admin.csrf()
	scope := url.Values{"corpus": {"papers"}, "service": {"tex_to_html"}}
	with := func(v url.Values, kv ...string) url.Values {
		out := url.Values{}
		for k, vs := range v {
			out[k] = vs
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, path := range []string{"/rerun", "/pause", "/resume", "/sandbox"} {
		form := with(scope, "severity", "fatal", "name", "sb"+strings.TrimPrefix(path, "/"))
		r := anon.post(path, form)
		require.Equal(t, http.StatusForbidden, r.code, path)
		require.Contains(t, r.body, "sign in first")
		r = anon.post(path, with(form, "csrf", csrf))
		require.Equal(t, http.StatusForbidden, r.code, "%s: a CSRF token without the session", path)
		r = admin.post(path, form)
		require.Equal(t, http.StatusForbidden, r.code, "%s without CSRF", path)
		require.Contains(t, r.body, "missing or wrong CSRF token")
		r = admin.post(path, with(form, "csrf", csrf+"x"))
		require.Equal(t, http.StatusForbidden, r.code, "%s with a wrong CSRF token", path)
		r = admin.post(path, with(form, "csrf", csrf), "Origin", "http://evil.example")
		require.Equal(t, http.StatusForbidden, r.code, "%s from another origin", path)
		require.Contains(t, r.body, "cross-origin request refused")
		r = admin.post(path, with(form, "csrf", csrf, "corpus", "nope"))
		require.Equal(t, http.StatusNotFound, r.code, path)
	}
	require.Equal(t, -4, f.status(f.bad), "nothing refused changed a task")

	ok := func(path string, form url.Values) string {
		t.Helper()
		r := admin.post(path, with(form, "csrf", csrf), "Origin", f.srv.URL)
		require.Equal(t, http.StatusOK, r.code, "%s: %s", path, r.body)
		return r.body
	}
	body := ok("/rerun", with(scope, "severity", "fatal", "category", "latex", "back", "/report?corpus=papers&service=tex_to_html"))
	require.Contains(t, body, "1 task back to TODO")
	require.Contains(t, body, `href="/report?corpus=papers&amp;service=tex_to_html"`)
	require.Equal(t, 0, f.status(f.bad))
	require.Equal(t, -2, f.status(f.warn), "only the slice is rerun")
	require.Contains(t, ok("/pause", scope), "2 TODO tasks blocked")
	require.Equal(t, -6, f.status(f.todo))
	require.Contains(t, ok("/resume", scope), "2 tasks back to TODO")
	require.Equal(t, 0, f.status(f.todo))
	require.Contains(t, ok("/sandbox", with(scope, "severity", "warning", "name", "sb1")), "sandbox sb1")
	var n int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE c.name = 'sb1'`).Scan(&n))
	require.Equal(t, 1, n)
	require.Contains(t, ok("/rerun", with(scope, "confirm", "all")), "slice all: 4 tasks back to TODO")
	// A back link elsewhere goes to the overview.
	require.Contains(t, ok("/resume", with(scope, "back", "//evil.example/")), `<a href="/">back</a>`)

	for _, tc := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/rerun", with(scope, "severity", "bad"), `severity &#34;bad&#34;: want one of`},
		{"/rerun", with(scope, "category", "no_messages"), "category no_messages needs a severity"},
		{"/rerun", url.Values{"corpus": {"papers"}}, "corpus and service are required"},
		{"/rerun", scope, "needs the box &#34;every task&#34; ticked"},
		{"/sandbox", with(scope, "name", ""), "sandbox name: empty name"},
		{"/sandbox", with(scope, "name", " x"), "begins or ends with blanks"},
		{"/sandbox", with(scope, "name", "sb1"), "a corpus of that name exists"},
		{"/sandbox", with(scope, "name", "sb2", "severity", "invalid"), "the slice holds no task"},
	} {
		r := admin.post(tc.path, with(tc.form, "csrf", csrf))
		require.Equal(t, http.StatusBadRequest, r.code, "%s %v: %s", tc.path, tc.form, r.body)
		require.Contains(t, r.body, tc.want)
	}
}

// TestWebReadOnlyRefusesActions: with --read-only, whatever the token, no sign-in, no buttons,
// every POST refused. (Without an admin token people still sign in with their own tokens.)
func TestWebReadOnlyRefusesActions(t *testing.T) {
	t.Parallel()
	for _, cfg := range []web.Config{{AdminToken: token, ReadOnly: true}} {
		f := newFixture(t, cfg)
		c := f.client()
		r := c.login(token)
		require.Equal(t, http.StatusForbidden, r.code)
		require.Contains(t, r.body, "read-only")
		require.Empty(t, r.header.Values("Set-Cookie"))
		for _, path := range []string{"/rerun", "/pause", "/resume", "/sandbox"} {
			r := c.post(path, url.Values{"corpus": {"papers"}, "service": {"tex_to_html"}})
			require.Equal(t, http.StatusForbidden, r.code, path)
			require.Contains(t, r.body, "this dashboard is read-only")
		}
		require.NotContains(t, c.get("/").body, `href="/login"`)
		require.Contains(t, c.get("/").body, "read-only")
		require.Equal(t, -4, f.status(f.bad))
	}
}

// TestWebTaskPageListsAThousandMessages keeps the task page of a task with many messages short.
func TestWebTaskPageListsAThousandMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	f.exec(`INSERT INTO task_messages (task_id, run, severity, category, what, details)
		SELECT $1, 1, 'warning', 'many', 'w' || g, '' FROM generate_series(1, 1005) AS g`, f.todo)
	r := f.client().get(fmt.Sprintf("/task/%d", f.todo))
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "The first 1000 messages")
	require.Equal(t, 1000, strings.Count(r.body, "<td>many</td>"))
}

// TestWebLiveKeepsToItsBudget: live figures that cost more than the budget allows are served
// again instead of read again; within the budget they are read again.
func TestWebLiveKeepsToItsBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		budget  time.Duration
		reread  bool
		comment string
	}{
		{time.Nanosecond, false, "any read costs more than a nanosecond a second"},
		{time.Hour, true, "no read costs an hour"},
	} {
		f := newFixture(t, web.Config{LiveMaxAge: time.Nanosecond, LiveBudget: tc.budget})
		c := f.client()
		before := c.get("/live").body
		require.Contains(t, before, `"TODO":1`)
		f.exec(`UPDATE tasks SET status = -1 WHERE id = $1`, f.todo)
		after := c.get("/live").body
		require.Equal(t, tc.reread, before != after, tc.comment)
	}
}

// TestWebSignInRateLimit: after 10 wrong tokens from one address, that address is refused (429,
// Retry-After) even with the right token, while another address still signs in; after 50 failures
// from all addresses together, a wrong token from any address gets 429 while the right one signs
// in. A right token does not use up the limit.
func TestWebSignInRateLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	srv, err := web.New(web.Config{Base: f.base, Store: f.store, AdminToken: token})
	require.NoError(t, err)
	srv.StopSignInClock() // the overall bucket refills one a 2 s: a slow run would see it
	login := func(addr, tok string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr + ":40000"
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	for range 20 {
		require.Equal(t, http.StatusSeeOther, login("10.0.0.1", token).Code, "right tokens are not limited")
	}
	for i := range 10 {
		require.Equal(t, http.StatusForbidden, login("10.0.0.1", "wrong").Code, "wrong token %d", i+1)
	}
	r := login("10.0.0.1", token)
	require.Equal(t, http.StatusTooManyRequests, r.Code, "the 11th attempt, right token or not")
	require.Contains(t, r.Body.String(), "too many failed sign-ins")
	wait, err := strconv.Atoi(r.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.True(t, wait >= 1 && wait <= 30, "Retry-After %d", wait)
	require.Empty(t, r.Header().Values("Set-Cookie"))
	require.Equal(t, http.StatusSeeOther, login("10.0.0.2", token).Code, "another address")
	// 40 more failures from other addresses make 50 in all.
	for i := range 40 {
		require.Equal(t, http.StatusForbidden, login(fmt.Sprintf("10.0.1.%d", i), "wrong").Code)
	}
	r = login("10.0.0.3", "wrong")
	require.Equal(t, http.StatusTooManyRequests, r.Code, "the overall limit")
	wait, err = strconv.Atoi(r.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.True(t, wait >= 1 && wait <= 2, "Retry-After %d", wait)
	require.Equal(t, http.StatusSeeOther, login("10.0.0.4", token).Code, "the right token passes the overall limit")
}

// TestWebSignOutRevokesTheSession: after signing out, a copy of the session's cookie is no
// session: no buttons, and its actions are refused.
func TestWebSignOutRevokesTheSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	require.Equal(t, http.StatusSeeOther, c.login(token).code)
	csrf := c.csrf()
	u, err := url.Parse(f.srv.URL)
	require.NoError(t, err)
	stolen := f.client()
	stolen.c.Jar.SetCookies(u, c.c.Jar.Cookies(u))
	require.Contains(t, stolen.get(pages(f)["report"]).body, `action="/rerun"`, "the copy works while signed in")
	other := f.client()
	require.Equal(t, http.StatusSeeOther, other.login(token).code)

	require.Equal(t, http.StatusSeeOther, c.post("/logout", nil).code)
	require.NotContains(t, c.get(pages(f)["report"]).body, `action="/rerun"`)
	require.NotContains(t, stolen.get(pages(f)["report"]).body, `action="/rerun"`, "the copy is revoked")
	r := stolen.post("/pause", url.Values{"corpus": {"papers"}, "service": {"tex_to_html"}, "csrf": {csrf}})
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, "sign in first")
	require.Equal(t, 0, f.status(f.todo), "the task is still TODO")
	require.Contains(t, other.get(pages(f)["report"]).body, `action="/rerun"`, "another session lives on")
}
