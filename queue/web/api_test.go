package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/web"
)

const bearer = "Bearer " + token

// TestAPIRoutesMatchTheSpec: the routes the dashboard registers under /api/v1 are the spec's
// operations, no more and no fewer, and GET /api/v1 lists them all.
func TestAPIRoutesMatchTheSpec(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	srv, err := web.New(web.Config{Base: f.base, Store: f.store})
	require.NoError(t, err)
	ends, err := api.Endpoints()
	require.NoError(t, err)
	var spec []string
	for _, e := range ends {
		spec = append(spec, e.Method+" "+e.Path)
	}
	routes := srv.APIRoutes()
	sort.Strings(spec)
	sort.Strings(routes)
	require.Equal(t, spec, routes)
	idx := f.client().api("GET", "/api/v1", "")
	require.Equal(t, http.StatusOK, idx.code)
	require.Len(t, idx.json["endpoints"], len(spec))
	require.GreaterOrEqual(t, len(spec), 25)
}

// TestAPIEveryEndpoint calls every endpoint of the spec on the fixture, each answer validated
// against the spec, and checks the numbers are the pages' and every operation was answered.
func TestAPIEveryEndpoint(t *testing.T) {
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	scope := "/api/v1/corpora/papers/services/tex_to_html"
	get := func(path string) map[string]any {
		t.Helper()
		r := c.api("GET", path, "")
		require.Equal(t, http.StatusOK, r.code, "%s: %s", path, r.body)
		return r.json
	}
	for _, p := range []string{"/api/v1", "/api/v1/status", "/api/v1/corpora", "/api/v1/services", "/api/v1/sandboxes",
		scope + "/status", scope + "/runs", scope + "/why", "/api/v1/workers", "/api/v1/leases", "/api/v1/dead-letters",
		"/api/v1/retries", "/api/v1/replicas", "/api/v1/search?q=source", fmt.Sprintf("/api/v1/search?q=%d", f.bad),
		"/api/v1/workers/attempts?worker=" + url.QueryEscape("worker"+xssAttr)} {
		get(p)
	}
	require.Contains(t, c.api("GET", "/api/v1/openapi.json", "").body, `"openapi":"3.1.0"`)
	docs := c.api("GET", "/api/v1/docs", "")
	require.Equal(t, http.StatusOK, docs.code)
	require.Contains(t, docs.body, "/api/v1/corpora/{corpus}/services/{service}/report/tasks")
	require.Contains(t, docs.body, `id="schema-ReportTasks"`)
	require.NotContains(t, docs.body, "<script>", "no inline script")

	// The ladder: severity → category → what → tasks, with the page's numbers.
	sev := get(scope + "/report")
	require.EqualValues(t, 4, sev["tasks"])
	fatal := sev["rows"].([]any)[3].(map[string]any)
	require.Equal(t, "fatal", fatal["name"])
	require.EqualValues(t, 1, fatal["tasks"])
	require.InDelta(t, 0.25, fatal["share"], 1e-9, "one fatal of the four tasks not invalid, as the page's 25.0%")
	cats := get(scope + "/report/categories?severity=fatal")
	require.Equal(t, "latex", cats["rows"].([]any)[0].(map[string]any)["name"])
	whats := get(scope + "/report/whats?severity=fatal&category=latex")
	what := whats["rows"].([]any)[0].(map[string]any)["name"].(string)
	require.Equal(t, "what"+xssScript, what)
	tasks := get(scope + "/report/tasks?severity=fatal&category=latex&what=" + url.QueryEscape(what))
	task := tasks["tasks"].([]any)[0].(map[string]any)
	require.EqualValues(t, f.bad, task["task_id"])
	require.Equal(t, fmt.Sprintf("/api/v1/tasks/%d", f.bad), task["task"])
	get(scope + "/report?all=1")
	get(scope + "/report/categories?severity=warning&all=1")
	one := get(fmt.Sprintf("/api/v1/tasks/%d", f.bad))
	require.Equal(t, "fatal", one["status"])
	msgs := get(fmt.Sprintf("/api/v1/tasks/%d/messages?limit=10", f.bad))
	require.Equal(t, "latex", msgs["messages"].([]any)[0].(map[string]any)["category"])

	// Where the run's time went (no stages recorded in this fixture: the counts are zero).
	require.EqualValues(t, 0, get(scope + "/stages")["summary"].(map[string]any)["tasks"])
	get("/api/v1/services/tex_to_html/stages?slowest=5")

	// The campaign: rerun the fatal slice, then diff the two runs.
	rerun := c.api("POST", scope+"/rerun", `{"severity":"fatal"}`, "Authorization", bearer)
	require.Equal(t, http.StatusOK, rerun.code, rerun.body)
	require.EqualValues(t, 1, rerun.json["tasks"])
	from := int64(rerun.json["previous"].(float64))
	diff := get(fmt.Sprintf("%s/diff?from=%d", scope, from))
	require.NotEmpty(t, diff["cells"])
	cell := get(fmt.Sprintf("%s/diff/tasks?from=%d&from_status=fatal&to_status=todo", scope, from))
	require.EqualValues(t, f.bad, cell["tasks"].([]any)[0].(map[string]any)["task_id"])
	require.Equal(t, http.StatusOK, c.api("POST", fmt.Sprintf("/api/v1/tasks/%d/rerun", f.warn), "", "Authorization", bearer).code)
	require.Equal(t, http.StatusOK, c.api("POST", scope+"/pause", "", "Authorization", bearer).code)
	require.Equal(t, http.StatusOK, c.api("POST", scope+"/resume", "", "Authorization", bearer).code)
	sb := c.api("POST", scope+"/sandboxes", `{"name":"papers-ok","severity":"no_problem"}`, "Authorization", bearer)
	require.Equal(t, http.StatusOK, sb.code, sb.body)
	require.Equal(t, http.StatusOK, c.api("DELETE", "/api/v1/sandboxes/papers-ok", "", "Authorization", bearer).code)
	t.Run("Lifecycle", testAPILifecycle)

	ends, err := api.Endpoints()
	require.NoError(t, err)
	for _, e := range ends {
		_, ok := exercised.Load(e.Operation)
		require.True(t, ok, "%s %s (%s) not answered 200 by a test", e.Method, e.Path, e.Operation)
	}
}

// TestAPIBadInput: unknown names 404, bad parameters 422, input that is not text 400, a body
// over 64 KiB 413, never a 500; each a JSON error with a code and a message.
func TestAPIBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	scope := "/api/v1/corpora/papers/services/tex_to_html"
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"GET", "/api/v1/corpora/nope/services/tex_to_html/report", "", 404, "nope"},
		{"GET", "/api/v1/corpora/papers/services/nope/runs", "", 404, "nope"},
		{"GET", "/api/v1/tasks/999999", "", 404, "no such task"},
		{"GET", "/api/v1/tasks/-1", "", 422, "want a positive number"},
		{"GET", "/api/v1/tasks/abc/messages", "", 422, "want a positive number"},
		{"GET", "/api/v1/nothing", "", 404, "GET /api/v1 lists them"},
		{"PUT", "/api/v1/status", "", 405, "not allowed"},
		{"GET", scope + "/report/categories?severity=fatal&limit=-1", "", 422, "want a whole number from 1 to 1000"},
		{"GET", scope + "/report/categories?severity=fatal&limit=99999999999999999999", "", 422, "want a whole number"},
		{"GET", scope + "/report/categories?severity=fatal&offset=100001", "", 422, "from 0 to 100000"},
		{"GET", scope + "/report/categories?severity=fatal&offset=abc", "", 422, "want a whole number"},
		{"GET", scope + "/report/tasks?severity=fatal&category=latex&what=x&offset=-5", "", 422, "want a whole number"},
		{"GET", scope + "/diff/tasks?from=1&from_status=nope&to_status=todo", "", 422, "from"},
		{"GET", scope + "/report/categories?severity=bad", "", 422, "severity"},
		{"GET", scope + "/report/categories", "", 422, "severity is required"},
		{"GET", scope + "/report/whats?severity=fatal", "", 422, "category is required"},
		{"GET", scope + "/report/tasks?severity=fatal&category=latex", "", 422, "what is required"},
		{"GET", scope + "/report?all=maybe", "", 422, "all"},
		{"GET", scope + "/diff?from=abc", "", 422, "want a run id"},
		{"GET", scope + "/diff?from=999", "", 422, "not a closed run"},
		{"GET", scope + "/diff/tasks?from=x", "", 422, "want a run id"},
		{"GET", scope + "/why?reap_interval=-5s", "", 422, "reap_interval"},
		{"GET", "/api/v1/search?q=ab", "", 422, "at least 3 characters"},
		{"GET", "/api/v1/workers/attempts", "", 422, "worker is required"},
		{"GET", fmt.Sprintf("/api/v1/tasks/%d/messages?offset=9001", f.bad), "", 422, "from 0 to 9000"},
		{"GET", "/api/v1/search?q=%ff%fe", "", 400, "UTF-8"},
		{"GET", "/api/v1/search?q=a%00b", "", 400, "NUL"},
		{"GET", "/api/v1/corpora/%ff/services/x/runs", "", 400, "UTF-8"},
		{"POST", scope + "/rerun", `{"severity":"fatal","nope":1}`, 400, "unknown field"},
		{"POST", scope + "/rerun", `{"severity":`, 400, "want a JSON object"},
		{"POST", scope + "/rerun", "{\"severity\":\"\xff\"}", 400, "UTF-8"},
		{"POST", scope + "/rerun", `{}`, 422, `needs "every": true`},
		{"POST", scope + "/rerun", `{"severity":"bogus"}`, 422, "bogus"},
		{"POST", scope + "/sandboxes", `{"name":""}`, 422, "sandbox name"},
		{"POST", scope + "/rerun", `{"what":"` + strings.Repeat("x", 10<<20) + `"}`, 413, "over 65536 bytes"},
		{"DELETE", "/api/v1/sandboxes/nope", "", 404, "no such sandbox"},
	} {
		r := c.api(tc.method, tc.path, tc.body, "Authorization", bearer)
		require.Equal(t, tc.code, r.code, "%s %s: %s", tc.method, tc.path, r.body)
		require.Contains(t, r.json["message"], tc.want, "%s %s", tc.method, tc.path)
		require.NotEmpty(t, r.json["code"], tc.path)
	}
	require.Equal(t, 1, f.status(f.ok)*-1, "nothing was changed by the refused actions")
}

// TestAPIActionsNeedTheToken: no token 401, a wrong one 401, a cookie session without its CSRF
// header 403 and with it 200; --read-only refuses every action 403 read_only but serves reads;
// so does a dashboard without a token.
func TestAPIActionsNeedTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	pause := "/api/v1/corpora/papers/services/tex_to_html/pause"
	r := c.api("POST", pause, "")
	require.Equal(t, http.StatusUnauthorized, r.code)
	require.Equal(t, `Bearer realm="cortexq"`, r.header.Get("WWW-Authenticate"))
	require.Equal(t, http.StatusUnauthorized, c.api("POST", pause, "", "Authorization", "Bearer wrong-token-0123456789").code)
	require.Equal(t, http.StatusUnauthorized, c.api("POST", pause, "", "Authorization", "Basic abc").code)
	require.Equal(t, 0, countBlocked(f))
	require.Equal(t, http.StatusSeeOther, c.login(token).code)
	require.Equal(t, http.StatusForbidden, c.api("POST", pause, "").code, "a cookie session needs its CSRF token")
	require.Equal(t, http.StatusForbidden, c.api("POST", pause, "", "X-CSRF-Token", "wrong").code)
	ok := c.api("POST", pause, "", "X-CSRF-Token", c.csrf())
	require.Equal(t, http.StatusOK, ok.code, ok.body)
	require.EqualValues(t, 1, ok.json["blocked"])

	for _, cfg := range []web.Config{{AdminToken: token, ReadOnly: true}, {}} {
		ro := newFixture(t, cfg)
		rc := ro.client()
		r := rc.api("POST", pause, "", "Authorization", bearer)
		require.Equal(t, http.StatusForbidden, r.code)
		require.Equal(t, "read_only", r.json["code"])
		require.Equal(t, http.StatusOK, rc.api("GET", "/api/v1/status", "").code)
		require.Equal(t, 0, countBlocked(ro))
	}
}

func countBlocked(f *fixture) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM tasks WHERE status <= -6`).Scan(&n))
	return n
}

// TestAPIHostileCostsWhatThePageCosts: the hostile task's messages (1,001 of 2,000 '<') over the
// API are clipped within the page's budget: each answer is smaller than its page, and every
// message's details are cut at 2 KiB, then 256 bytes once 512 KiB are given.
func TestAPIHostileCostsWhatThePageCosts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	f.hostile()
	c := f.client()
	pages, apis := hostilePaths(f)[1:], hostileAPIPaths(f)
	for i, p := range apis {
		page := c.get(pages[i].path)
		r := c.api("GET", p.path, "")
		require.Equal(t, http.StatusOK, r.code, p.name)
		require.Less(t, len(r.body), len(page.body), "%s: the API's answer is not larger than its page", p.name)
		require.Less(t, len(r.body), 1_200_000, p.name)
		require.Equal(t, false, r.json["late"], p.name)
		t.Logf("%s: %d bytes (its page %d bytes)", p.name, len(r.body), len(page.body))
	}
	msgs := c.api("GET", apis[0].path, "").json["messages"].([]any)
	require.Len(t, msgs, 1000)
	last := msgs[999].(map[string]any)
	require.EqualValues(t, 2000, last["details_bytes"])
	require.Len(t, last["details"], api.SpentMax, "past the list's budget, 256 bytes each")
	require.Len(t, msgs[1].(map[string]any)["details"], 2000, "within it, the whole 2,000")
}
