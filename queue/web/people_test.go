package web_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/audit"
	"github.com/cortexq/cortexq/queue/web"
)

// mint makes a token for owner with role, straight in the database (as cortexq token create).
func (f *fixture) mint(owner, role string) audit.Minted {
	f.t.Helper()
	m, err := audit.MintToken(f.ctx, f.pool, owner, role, 0)
	require.NoError(f.t, err)
	return m
}

// auditRow is the newest audit row's columns a test looks at.
type auditRow struct {
	Actor, Surface, Action, Target, Outcome, Error string
	Matched                                        *int64
}

func (f *fixture) lastAudit() (auditRow, int) {
	f.t.Helper()
	var a auditRow
	var n int
	require.NoError(f.t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM audit_log`).Scan(&n))
	if n == 0 {
		return a, 0
	}
	require.NoError(f.t, f.pool.QueryRow(f.ctx, `SELECT actor, surface, action, target, outcome, error, matched
		FROM audit_log ORDER BY id DESC LIMIT 1`).Scan(&a.Actor, &a.Surface, &a.Action, &a.Target, &a.Outcome, &a.Error, &a.Matched))
	return a, n
}

// fill puts the fixture's values in a route pattern's wildcards.
func (f *fixture) fill(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	for k, v := range map[string]string{"{corpus}": "papers", "{service}": "tex_to_html",
		"{id}": strconv.FormatInt(f.bad, 10), "{name}": "nosuch", "{owner}": "nobody"} {
		path = strings.ReplaceAll(path, k, v)
	}
	return method, path
}

// TestEveryMutatingRouteIsAudited walks the router's own patterns: every one that is not a GET
// must append an audit row for a refused attempt (no credentials, or from another origin) and
// for an admin's attempt, naming the surface and the actor. A route added without going through
// the audited registration fails here.
func TestEveryMutatingRouteIsAudited(t *testing.T) {
	f := newFixture(t, web.Config{AdminToken: token, PasskeyRPID: "localhost"}) // passkeys on: their routes act
	var mutating []string
	for _, p := range f.web.Patterns() {
		if !strings.HasPrefix(p, "GET ") {
			mutating = append(mutating, p)
		}
	}
	// Sign-out last: it ends the admin's session the others use.
	sort.SliceStable(mutating, func(i, j int) bool {
		return !strings.HasSuffix(mutating[i], "/logout") && strings.HasSuffix(mutating[j], "/logout")
	})
	require.GreaterOrEqual(t, len(mutating), 17, mutating)
	for _, want := range []string{"POST /rerun", "POST /pause", "POST /login", "POST /sessions/revoke",
		"POST /api/v1/tokens", "DELETE /api/v1/tokens/{id}", "POST /api/v1/corpora/{corpus}/services/{service}/rerun"} {
		require.Contains(t, mutating, want)
	}
	admin := f.client()
	require.Equal(t, http.StatusSeeOther, admin.login(token).code)
	csrf := admin.csrf()
	anon := f.client()
	form := url.Values{"corpus": {"papers"}, "service": {"tex_to_html"}, "task": {strconv.FormatInt(f.warn, 10)},
		"severity": {"warning"}, "name": {"sbx"}, "id": {"999999"}, "token": {token}}
	for _, p := range mutating {
		method, path := f.fill(p)
		if path == "/logout" { // the admin's session may be gone (a session revoked above): a fresh one
			admin = f.client()
			require.Equal(t, http.StatusSeeOther, admin.login(token).code)
		}
		_, before := f.lastAudit()
		var refused, done int
		if strings.HasPrefix(path, "/api/") {
			refused = anon.api(method, path, "").code
			_, n := f.lastAudit()
			require.Equal(t, before+1, n, "%s: the refused attempt appends one row", p)
			done = admin.api(method, path, `{"severity":"warning"}`, "Authorization", "Bearer "+token).code
		} else {
			refused = anon.post(path, form, "Origin", "http://elsewhere.example").code
			_, n := f.lastAudit()
			require.Equal(t, before+1, n, "%s: the refused attempt appends one row", p)
			withCSRF := url.Values{"csrf": {csrf}}
			for k, v := range form {
				withCSRF[k] = v
			}
			done = admin.post(path, withCSRF).code
		}
		require.Contains(t, []int{401, 403}, refused, p)
		row, n := f.lastAudit()
		require.Equal(t, before+2, n, "%s: the admin's attempt appends one row", p)
		surface := "web"
		if strings.HasPrefix(path, "/api/") {
			surface = "api"
		}
		require.Equal(t, surface, row.Surface, p)
		require.Equal(t, web.AdminOwner, row.Actor, p)
		require.NotEmpty(t, row.Action, p)
		var refusedRow auditRow
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT outcome, surface, action FROM audit_log ORDER BY id DESC OFFSET 1 LIMIT 1`).
			Scan(&refusedRow.Outcome, &refusedRow.Surface, &refusedRow.Action))
		require.Equal(t, "refused", refusedRow.Outcome, p)
		require.Equal(t, row.Action, refusedRow.Action, p)
		if done < 400 {
			require.Contains(t, []string{"ok", "dry_run"}, row.Outcome, "%s answered %d", p, done)
		} else {
			require.Contains(t, []string{"refused", "failed"}, row.Outcome, "%s answered %d", p, done)
		}
	}
}

// TestRoles: a viewer's token reads the audit log but cannot mutate; an operator's pauses and
// reruns but cannot mint tokens or delete; an admin's mints a token that then works; an expired
// or revoked token is refused; each refused attempt is audited under its owner.
func TestRoles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	viewer, operator, boss := f.mint("vera", "viewer"), f.mint("otto", "operator"), f.mint("ada", "admin")
	as := func(m audit.Minted) []string { return []string{"Authorization", "Bearer " + m.Token} }
	scope := "/api/v1/corpora/papers/services/tex_to_html"

	r := c.api("POST", scope+"/pause", "", as(viewer)...)
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	require.Contains(t, r.json["message"], "needs the role operator")
	row, _ := f.lastAudit()
	require.Equal(t, auditRow{Actor: "vera", Surface: "api", Action: "pause", Target: "corpus papers, service tex_to_html",
		Outcome: "refused", Error: r.json["message"].(string)}, row)
	require.Equal(t, http.StatusForbidden, c.api("POST", scope+"/rerun", `{"severity":"fatal"}`, as(viewer)...).code)
	require.Equal(t, http.StatusOK, c.api("GET", "/api/v1/audit?actor=vera", "", as(viewer)...).code)
	require.Equal(t, http.StatusUnauthorized, c.api("GET", "/api/v1/audit", "").code, "the audit log is a signed-in viewer's")
	require.Equal(t, 0, countBlocked(f))

	r = c.api("POST", scope+"/pause", "", as(operator)...)
	require.Equal(t, http.StatusOK, r.code, r.body)
	row, _ = f.lastAudit()
	require.Equal(t, "otto", row.Actor)
	require.Equal(t, "ok", row.Outcome)
	require.NotNil(t, row.Matched)
	r = c.api("POST", "/api/v1/tokens", `{"owner":"mallory","role":"admin"}`, as(operator)...)
	require.Equal(t, http.StatusForbidden, r.code, "an operator cannot mint tokens")
	require.Contains(t, r.json["message"], "needs the role admin")
	require.Equal(t, http.StatusForbidden, c.api("DELETE", "/api/v1/sandboxes/nosuch", "", as(operator)...).code)

	r = c.api("POST", "/api/v1/tokens", `{"owner":"nina","role":"operator"}`, as(boss)...)
	require.Equal(t, http.StatusOK, r.code, r.body)
	minted := r.json["token"].(string)
	require.Equal(t, http.StatusOK, c.api("POST", scope+"/resume", "", "Authorization", "Bearer "+minted).code)
	row, _ = f.lastAudit()
	require.Equal(t, "nina", row.Actor)

	// Expired and revoked tokens are refused, 401, saying which.
	f.exec(`UPDATE api_tokens SET expires_at = now() - interval '1 hour' WHERE id = $1`, operator.ID)
	r = c.api("POST", scope+"/pause", "", as(operator)...)
	require.Equal(t, http.StatusUnauthorized, r.code)
	require.Contains(t, r.json["message"], "expired")
	r = c.api("DELETE", fmt.Sprintf("/api/v1/tokens/%d", viewer.ID), "", as(boss)...)
	require.Equal(t, http.StatusOK, r.code, r.body)
	r = c.api("GET", "/api/v1/audit", "", as(viewer)...)
	require.Equal(t, http.StatusUnauthorized, r.code)
	require.Contains(t, r.json["message"], "revoked")

	// The dashboard: a viewer signs in and gets no rerun; the refusal names the role.
	v2 := f.mint("val", "viewer")
	b := f.client()
	require.Equal(t, http.StatusSeeOther, b.post("/login", url.Values{"token": {v2.Token}}).code)
	p := b.post("/pause", url.Values{"csrf": {b.csrf()}, "corpus": {"papers"}, "service": {"tex_to_html"}})
	require.Equal(t, http.StatusForbidden, p.code)
	require.Contains(t, p.body, "needs the role operator")
	require.Equal(t, http.StatusOK, b.get("/audit").code)
	require.Contains(t, b.get("/audit?actor=val").body, "needs the role operator")
	require.Equal(t, http.StatusForbidden, f.client().get("/audit").code, "the audit page is a signed-in viewer's")
}

// TestRerunDryRun: dry_run=true answers the count and changes nothing (audited as dry_run with
// the count); without it the rerun moves exactly that many.
func TestRerunDryRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	path := "/api/v1/corpora/papers/services/tex_to_html/rerun"
	r := c.api("POST", path+"?dry_run=true", `{"severity":"fatal"}`, "Authorization", bearer)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Equal(t, true, r.json["dry_run"])
	require.EqualValues(t, 1, r.json["tasks"])
	require.NotEqual(t, 0, f.status(f.bad), "a preview changes nothing")
	row, _ := f.lastAudit()
	one := int64(1)
	require.Equal(t, "dry_run", row.Outcome)
	require.Equal(t, &one, row.Matched)
	r = c.api("POST", path, `{"severity":"fatal"}`, "Authorization", bearer)
	require.EqualValues(t, 1, r.json["tasks"])
	require.Equal(t, 0, f.status(f.bad))
	require.Equal(t, http.StatusUnprocessableEntity, c.api("POST", path+"?dry_run=maybe", `{"severity":"fatal"}`, "Authorization", bearer).code)
}

// TestSessions: a session is listed with where it came from; revoking the owner's tokens ends it
// at once (its next request is refused); an owner ends its own session, not another's; an admin
// ends anyone's.
func TestSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	otto := f.mint("otto", "operator")
	b := f.client()
	require.Equal(t, http.StatusSeeOther, b.post("/login", url.Values{"token": {otto.Token}}).code)
	csrf := b.csrf()
	page := b.get("/sessions")
	require.Equal(t, http.StatusOK, page.code)
	require.Contains(t, page.body, "(this one)")
	require.Contains(t, page.body, "127.0.0.1")
	r := b.api("GET", "/api/v1/sessions", "")
	require.Equal(t, http.StatusOK, r.code, r.body)
	list := r.json["sessions"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, "otto", list[0].(map[string]any)["owner"])
	require.Equal(t, true, list[0].(map[string]any)["current"])

	// Another owner's session is not otto's to end.
	vera := f.mint("vera", "viewer")
	v := f.client()
	require.Equal(t, http.StatusSeeOther, v.post("/login", url.Values{"token": {vera.Token}}).code)
	var veraSession int64
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT id FROM web_sessions WHERE owner = 'vera'`).Scan(&veraSession))
	r = b.api("DELETE", fmt.Sprintf("/api/v1/sessions/%d", veraSession), "", "X-CSRF-Token", csrf)
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	// Vera ends her own.
	r = v.api("DELETE", fmt.Sprintf("/api/v1/sessions/%d", veraSession), "", "X-CSRF-Token", v.csrf())
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Equal(t, http.StatusUnauthorized, v.api("GET", "/api/v1/sessions", "").code, "her session is gone")

	// Revoking otto's tokens ends otto's session: the next request is refused.
	pause := url.Values{"csrf": {csrf}, "corpus": {"papers"}, "service": {"tex_to_html"}}
	require.Equal(t, http.StatusOK, b.post("/pause", pause).code)
	r = f.client().api("DELETE", "/api/v1/owners/otto/tokens", "", "Authorization", bearer)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.EqualValues(t, 1, r.json["tokens"])
	require.EqualValues(t, 1, r.json["sessions"])
	p := b.post("/resume", pause)
	require.Equal(t, http.StatusForbidden, p.code)
	require.Contains(t, p.body, "sign in first")
	row, _ := f.lastAudit()
	require.Equal(t, "refused", row.Outcome)
	require.Equal(t, "resume", row.Action)

	// A session revoked by its owner's name from the dashboard, by an admin.
	adm := f.client()
	require.Equal(t, http.StatusSeeOther, adm.login(token).code)
	ana := f.mint("ana", "operator")
	a := f.client()
	require.Equal(t, http.StatusSeeOther, a.post("/login", url.Values{"token": {ana.Token}}).code)
	require.Contains(t, a.get("/").body, `action="/resume"`)
	require.Contains(t, adm.get("/sessions").body, "ana")
	require.Equal(t, http.StatusOK, adm.post("/sessions/revoke", url.Values{"csrf": {adm.csrf()}, "owner": {"ana"}}).code)
	require.NotContains(t, a.get("/").body, `action="/resume"`, "ana's session ended")
}

// TestTablesHoldNoSecret dumps the token and session tables (and the audit log) as text after
// signing in with a person's token and the admin token: neither a token nor a session cookie is
// there, in clear, base64 or hex.
func TestTablesHoldNoSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	m := f.mint("otto", "operator")
	var secrets []string
	for _, tok := range []string{m.Token, token} {
		c := f.client()
		r := c.post("/login", url.Values{"token": {tok}})
		require.Equal(t, http.StatusSeeOther, r.code)
		u, _ := url.Parse(f.srv.URL)
		for _, ck := range c.c.Jar.Cookies(u) {
			if ck.Name == web.SessionCookie {
				secrets = append(secrets, ck.Value)
			}
		}
		secrets = append(secrets, tok)
	}
	require.Len(t, secrets, 4)
	var forms []string
	for _, s := range secrets {
		forms = append(forms, s, strings.TrimPrefix(s, audit.TokenPrefix), hex.EncodeToString([]byte(s)))
		if raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, audit.TokenPrefix)); err == nil {
			forms = append(forms, hex.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw))
		}
	}
	rows, err := f.pool.Query(f.ctx, `SELECT t::text FROM api_tokens t UNION ALL SELECT s::text FROM web_sessions s
		UNION ALL SELECT a::text FROM audit_log a`)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		n++
		for _, form := range forms {
			require.NotContains(t, line, form)
		}
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, n, 3)
}

// from is a client whose connections come from a loopback address of its own (127.0.0.N), so
// the address limit and the owner limit can be told apart.
func (f *fixture) from(ip string) *client {
	c := f.client()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c.c.Transport = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	jar, err := cookiejar.New(nil)
	require.NoError(f.t, err)
	c.c.Jar = jar
	return c
}

// TestLockoutPerOwnerAndAddress: wrong tokens naming one owner, from several addresses, lock
// that owner out (even its right token, from a fresh address, is refused 429) while another
// owner signs in from the same addresses; wrong tokens from one address lock that address out
// whatever owner they name. Each refusal is audited.
func TestLockoutPerOwnerAndAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	ana, bob := f.mint("ana", "operator"), f.mint("bob", "operator")
	for i := range 10 {
		c := f.from(fmt.Sprintf("127.0.0.%d", 2+i%2))
		r := c.post("/login", url.Values{"owner": {"ana"}, "token": {"cqt_wrong" + strconv.Itoa(i)}})
		require.Equal(t, http.StatusForbidden, r.code, r.body)
	}
	row, _ := f.lastAudit()
	require.Equal(t, auditRow{Actor: "ana", Surface: "web", Action: "sign-in", Outcome: "refused", Target: "owner ana",
		Error: "wrong token: give your own (cortexq token create) or the admin token"}, row)
	fresh := f.from("127.0.0.4")
	r := fresh.post("/login", url.Values{"owner": {"ana"}, "token": {ana.Token}})
	require.Equal(t, http.StatusTooManyRequests, r.code, "ana is locked out")
	require.NotEmpty(t, r.header.Get("Retry-After"))
	require.Equal(t, http.StatusTooManyRequests, fresh.post("/login", url.Values{"token": {ana.Token}}).code,
		"her token alone, not naming her, is refused too")
	require.Equal(t, http.StatusTooManyRequests, fresh.api("GET", "/api/v1/sessions", "", "Authorization", "Bearer "+ana.Token).code,
		"and as a bearer")
	require.Equal(t, http.StatusSeeOther, f.from("127.0.0.2").post("/login", url.Values{"token": {bob.Token}}).code,
		"bob signs in from an address that failed for ana")
	row, _ = f.lastAudit()
	require.Equal(t, "bob", row.Actor)
	require.Equal(t, "ok", row.Outcome)

	// One address: ten wrong tokens naming no one lock it out, whatever the token.
	for i := range 10 {
		require.Equal(t, http.StatusForbidden, f.from("127.0.0.5").post("/login", url.Values{"token": {"cqt_nope" + strconv.Itoa(i)}}).code)
	}
	require.Equal(t, http.StatusTooManyRequests, f.from("127.0.0.5").post("/login", url.Values{"token": {bob.Token}}).code)
	require.Equal(t, http.StatusSeeOther, f.from("127.0.0.6").post("/login", url.Values{"token": {bob.Token}}).code)
}
