package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	cdpwebauthn "github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/web"
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

// TestBrowserPasskeyEnrollSignOutSignIn: signed in with the token, the browser enrolls a passkey
// on the virtual authenticator, signs out, signs back in with the passkey alone and reruns a
// slice; the passkey's row has its owner, transport and use recorded.
func TestBrowserPasskeyEnrollSignOutSignIn(t *testing.T) {
	f, base := passkeyFixture(t)
	b := newBrowser(t)
	addAuthenticator(b)
	b.signIn(base)
	enrollPasskey(b, base, "laptop")
	var owner, name, transports string
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT owner, name, array_to_string(transports, ',') FROM passkeys`).Scan(&owner, &name, &transports))
	require.Equal(t, "admin", owner)
	require.Equal(t, "laptop", name)
	require.Contains(t, transports, "internal")
	b.screenshot("web-passkeys")

	b.do(chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.CSS(`a[href="/login"]`)))
	signInWithPasskey(b, base, "")
	var used int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM passkeys WHERE last_used_at IS NOT NULL`).Scan(&used))
	require.Equal(t, 1, used, "the sign-in is recorded on the passkey")

	b.load(base + pages(f)["severity"])
	b.do(chromedp.Click(chromedp.CSS(`.slice-actions form[action="/rerun"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.done`)))
	require.Contains(t, value(b, chromedp.TextContent(chromedp.CSS(`p.done`))), "1 task back to TODO")
	require.Equal(t, 0, f.status(f.bad))

	// By owner name too; another owner's name finds no passkey on this authenticator.
	b.do(chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.CSS(`a[href="/login"]`)))
	signInWithPasskey(b, base, "admin")
	require.Empty(t, b.problems())
}

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
	b.do(chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.CSS(`a[href="/login"]`)))
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
