package web_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdpwebauthn "github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/web"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// The passkey tests run Chromium with a virtual authenticator (the DevTools protocol's WebAuthn
// domain): CTAP2, internal transport, resident keys, user verification that succeeds, presence
// simulated. WebAuthn needs a secure context and a domain as the relying party's id: the
// dashboard is reached at http://localhost:PORT (localhost is potentially trustworthy).

// passkeyFixture is a dashboard with passkeys on for localhost, and its URL through localhost.
func passkeyFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t, web.Config{AdminToken: token, PasskeyRPID: "localhost"})
	return f, strings.Replace(f.srv.URL, "127.0.0.1", "localhost", 1)
}

// addAuthenticator enables the WebAuthn domain in the browser's tab and adds a virtual
// authenticator that holds discoverable credentials.
func addAuthenticator(b *browser) cdpwebauthn.AuthenticatorID {
	b.t.Helper()
	no := false
	_, err := chromedp.Call(b.ctx, cdpwebauthn.Enable, cdpwebauthn.EnableParams{EnableUI: &no})
	require.NoError(b.t, err)
	res, err := chromedp.Call(b.ctx, cdpwebauthn.AddVirtualAuthenticator, cdpwebauthn.AddVirtualAuthenticatorParams{
		Options: &cdpwebauthn.VirtualAuthenticatorOptions{Protocol: cdpwebauthn.AuthenticatorProtocolCtap2,
			Ctap2version: cdpwebauthn.Ctap2versionCtap21, Transport: cdpwebauthn.AuthenticatorTransportInternal,
			HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true}})
	require.NoError(b.t, err)
	return res.AuthenticatorID
}

// enrollPasskey enrolls a passkey named name on the /passkeys page of a signed-in browser.
func enrollPasskey(b *browser, base, name string) {
	b.t.Helper()
	b.load(base + "/passkeys")
	b.do(chromedp.SetValue(chromedp.CSS(`#passkey-enroll input[name="name"]`), name),
		chromedp.Click(chromedp.CSS(`#passkey-enroll button`)),
		chromedp.WaitVisible(chromedp.CSS(`#passkeys tbody tr`)))
	status := value(b, chromedp.TextContent(chromedp.CSS(`#passkey-status`)))
	require.NotContains(b.t, status, "failed")
	require.Empty(b.t, b.problems())
}

// signInWithPasskey signs in on /login with the authenticator's passkey, of owner if given.
func signInWithPasskey(b *browser, base, owner string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS(`#passkey-login button`)))
	if owner != "" {
		b.do(chromedp.SendKeys(chromedp.CSS(`#passkey-login input[name="owner"]`), owner))
	}
	b.do(chromedp.Click(chromedp.CSS(`#passkey-login button`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/logout"]`)))
	require.Empty(b.t, b.problems())
}

// personToken stores a token for owner with role, as cortexq token create does, and returns it.
func personToken(f *fixture, owner, role string) string {
	f.t.Helper()
	tok := "cqt_test_" + owner + "_0123456789abcdef"
	d := sha256.Sum256([]byte(tok))
	f.exec(`INSERT INTO api_tokens (owner, role, digest) VALUES ($1, $2, $3)`, owner, role, d[:])
	return tok
}

// signInWithToken signs in on /login with a token.
func signInWithToken(b *browser, base, tok string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), tok), chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/logout"]`)))
	require.Empty(b.t, b.problems())
}

// signOut signs out and waits for the page it lands on (the navigation's sign-in link: the
// passkeys page links /login in its text).
func signOut(b *browser) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.CSS(`nav a[href="/login"]`)))
}

// auditRows counts the audit rows of the dashboard that match a condition; it logs them all
// when none does.
func auditRows(f *fixture, where string, args ...any) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM audit_log WHERE surface = 'web' AND `+where, args...).Scan(&n))
	if n == 0 {
		rows, err := f.pool.Query(f.ctx, `SELECT concat_ws(' | ', actor, action, target, outcome, matched, error) FROM audit_log ORDER BY id`)
		require.NoError(f.t, err)
		all, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(f.t, err)
		f.t.Logf("no audit row where %s; the rows:\n%s", where, strings.Join(all, "\n"))
	}
	return n
}

// TestBrowserPasskeyEnrollSignOutSignIn is issue 59's acceptance: signed in with her operator
// token, alice enrolls a passkey on the virtual authenticator, signs out, signs back in with the
// passkey alone and reruns a slice; the rerun's audit row names her. Her owner is revoked
// (token revoke --owner): the session's next request is refused, and so is her passkey.
func TestBrowserPasskeyEnrollSignOutSignIn(t *testing.T) {
	f, base := passkeyFixture(t)
	tok := personToken(f, "alice", "operator")
	b := newBrowser(t)
	addAuthenticator(b)
	signInWithToken(b, base, tok)
	enrollPasskey(b, base, "laptop")
	var owner, name, transports string
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT owner, name, array_to_string(transports, ',') FROM passkeys`).Scan(&owner, &name, &transports))
	require.Equal(t, "alice", owner)
	require.Equal(t, "laptop", name)
	require.Contains(t, transports, "internal")
	require.Equal(t, 1, auditRows(f, `action = 'passkey enroll' AND actor = 'alice' AND outcome = 'ok'`))
	b.screenshot("web-passkeys")

	signOut(b)
	signInWithPasskey(b, base, "")
	require.Contains(t, value(b, chromedp.TextContent(chromedp.CSS(`nav`))), "alice (operator)")
	var used int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM passkeys WHERE last_used_at IS NOT NULL`).Scan(&used))
	require.Equal(t, 1, used, "the sign-in is recorded on the passkey")
	require.Equal(t, 1, auditRows(f, `action = 'sign-in' AND target = 'passkey' AND actor = 'alice' AND outcome = 'ok'`))

	b.load(base + pages(f)["severity"])
	b.do(chromedp.Click(chromedp.CSS(`.slice-actions form[action="/rerun"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.done`)))
	require.Contains(t, value(b, chromedp.TextContent(chromedp.CSS(`p.done`))), "1 task would go back to TODO")
	b.do(chromedp.Click(chromedp.CSS(`main form[action="/rerun"] button`)),
		chromedp.WaitNotPresent(chromedp.CSS(`main form[action="/rerun"]`)), chromedp.WaitVisible(chromedp.CSS(`p.done`)))
	require.Contains(t, value(b, chromedp.TextContent(chromedp.CSS(`p.done`))), "1 task back to TODO")
	require.Equal(t, 0, f.status(f.bad))
	require.Equal(t, 1, auditRows(f, `action = 'rerun' AND actor = 'alice' AND outcome = 'dry_run'`))
	require.Equal(t, 1, auditRows(f, `action = 'rerun' AND actor = 'alice' AND outcome = 'ok' AND matched = 1`))

	// Revoke the owner, as cortexq token revoke --owner alice does: the page already open
	// acts no more.
	b.load(base + pages(f)["severity"])
	revoked, err := dbsqlc.New(f.pool).TokenRevoke(f.ctx, nil, ptr("alice"))
	require.NoError(t, err)
	require.EqualValues(t, 1, revoked)
	b.do(chromedp.Click(chromedp.CSS(`.slice-actions form[action="/rerun"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.error`)))
	require.Contains(t, value(b, chromedp.TextContent(chromedp.CSS(`p.error`))), "sign in first")
	require.Equal(t, 1, auditRows(f, `action = 'rerun' AND outcome = 'refused'`))
	require.Equal(t, 1, auditRows(f, `action = 'rerun' AND outcome = 'ok'`), "no second rerun")
	b.problems() // the refusal's 403 is reported by the browser

	// Her passkey signs nobody in now.
	b.do(chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS(`#passkey-login button`)),
		chromedp.Click(chromedp.CSS(`#passkey-login button`)))
	value(b, chromedp.Poll[bool](`document.getElementById("passkey-status").textContent.includes("sign-in failed")`, chromedp.WithPollingTimeout(30*time.Second)))
	require.Contains(t, value(b, chromedp.TextContent(chromedp.CSS(`#passkey-status`))), "no live token")
	require.Equal(t, 1, auditRows(f, `action = 'sign-in' AND target = 'passkey' AND actor = 'alice' AND outcome = 'refused'`))
	b.problems()

	// The break-glass admin token still signs in, and an admin sees and deletes alice's passkey.
	b.signIn(base)
	b.load(base + "/passkeys")
	b.do(chromedp.Click(chromedp.CSS(`#passkeys form[action="/passkeys/delete"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.done`)))
	require.Contains(t, value(b, chromedp.TextContent(chromedp.CSS(`p.done`))), `"laptop" of alice`)
	require.Equal(t, 1, auditRows(f, `action = 'passkey delete' AND actor = 'admin' AND outcome = 'ok'`))
}

func ptr[T any](v T) *T { return &v }

// ceremonyJS begins a discoverable sign-in in the page and answers its challenge with the
// authenticator, without sending the answer: it returns the assertion as JSON.
const ceremonyJS = `(async () => {
  const r = await fetch("/login/passkey/begin", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"});
  const o = await r.json();
  const c = await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(o.publicKey)});
  return JSON.stringify(c.toJSON());
})()`

// TestBrowserPasskeyCeremonyIsSingleUse: an assertion answered once signs in; the same
// assertion with the same ceremony cookie sent again is refused, and the refusal is audited.
func TestBrowserPasskeyCeremonyIsSingleUse(t *testing.T) {
	f, base := passkeyFixture(t)
	b := newBrowser(t)
	addAuthenticator(b)
	b.signIn(base)
	enrollPasskey(b, base, "key")
	signOut(b)
	b.load(base + "/login")
	assertion := value(b, chromedp.Evaluate[string](ceremonyJS, chromedp.EvalAwaitPromise))
	cookies, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
	require.NoError(t, err)
	var ceremony string
	for _, c := range cookies.Cookies {
		if c.Name == "cortexq_webauthn" {
			ceremony = c.Value
		}
	}
	require.NotEmpty(t, ceremony, "the ceremony's cookie")
	finish := func() (int, string) {
		req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/login/passkey/finish", strings.NewReader(assertion))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(&http.Cookie{Name: "cortexq_webauthn", Value: ceremony})
		r := read(t, mustDo(t, req))
		return r.code, r.body
	}
	code, body := finish()
	require.Equal(t, http.StatusOK, code, body)
	var ok struct{ Owner, Role string }
	require.NoError(t, json.Unmarshal([]byte(body), &ok))
	require.Equal(t, "admin", ok.Owner)
	require.Equal(t, "admin", ok.Role)
	code, body = finish()
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "expired or was already used")
	var refused int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM audit_log WHERE surface = 'web' AND action = 'sign-in'
		AND outcome = 'refused' AND error LIKE '%already used%'`).Scan(&refused))
	require.Equal(t, 1, refused)
}

func mustDo(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, fmt.Sprintf("%s %s", req.Method, req.URL))
	return resp
}
