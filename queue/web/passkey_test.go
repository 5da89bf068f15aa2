package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/web"
)

// TestPasskeyConfigRefusesBadRelyingParty: an origin without an RP id, an RP id that is an
// address, an origin not on the RP id are refused at start.
func TestPasskeyConfigRefusesBadRelyingParty(t *testing.T) {
	f := newFixture(t, web.Config{AdminToken: token})
	for _, c := range []struct {
		id      string
		origins []string
		want    string
	}{
		{"", []string{"https://cortexq.example.org"}, "needs --passkey-rp-id"},
		{"127.0.0.1", nil, "not an address"},
		{"https://cortexq.example.org", nil, "not an address"},
		{"example.org", []string{"https://cortexq.example.com"}, "is not on --passkey-rp-id"},
		{"example.org", []string{"ftp://example.org"}, "want scheme://host"},
	} {
		_, err := web.New(web.Config{Base: f.base, Store: f.store, PasskeyRPID: c.id, PasskeyOrigins: c.origins})
		require.ErrorContains(t, err, c.want, "%s %v", c.id, c.origins)
	}
	_, err := web.New(web.Config{Base: f.base, Store: f.store, PasskeyRPID: "example.org",
		PasskeyOrigins: []string{"https://cortexq.example.org:8443"}})
	require.NoError(t, err, "a subdomain's origin with a port")
}

// postJSON posts a JSON body with the client's cookies, and headers in pairs.
func (c *client) postJSON(path, body string, header ...string) response {
	c.f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.f.srv.URL+path, strings.NewReader(body))
	require.NoError(c.f.t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.c.Do(req)
	require.NoError(c.f.t, err)
	return read(c.f.t, resp)
}

// TestPasskeyEndpointsRefuse: enrolment needs a session, its CSRF token and the same origin;
// sign-in needs its ceremony; every refusal is a JSON error and has its audit row. With
// passkeys off, every passkey route refuses.
func TestPasskeyEndpointsRefuse(t *testing.T) {
	f, _ := passkeyFixture(t)
	c := f.client()
	r := c.postJSON("/passkeys/enroll/begin", `{"name":"x"}`)
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, `"error":"sign in first`)
	require.Equal(t, http.StatusForbidden, c.get("/passkeys").code)

	require.Equal(t, http.StatusSeeOther, c.login(token).code)
	csrf := c.csrf()
	r = c.postJSON("/passkeys/enroll/begin", `{"name":"x"}`)
	require.Equal(t, http.StatusForbidden, r.code, "no CSRF token")
	r = c.postJSON("/passkeys/enroll/begin", `{"name":"x"}`, "X-CSRF-Token", csrf, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, r.code, "another origin")
	r = c.postJSON("/passkeys/enroll/begin", `{"name":"a\u0000b"}`, "X-CSRF-Token", csrf)
	require.Equal(t, http.StatusBadRequest, r.code, r.body)
	r = c.postJSON("/passkeys/enroll/begin", `{"name":"`+strings.Repeat("n", 101)+`"}`, "X-CSRF-Token", csrf)
	require.Equal(t, http.StatusBadRequest, r.code, r.body)
	r = c.postJSON("/passkeys/enroll/begin", `{"name":"laptop"}`, "X-CSRF-Token", csrf)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, `"rp":{"name":"cortexq","id":"localhost"}`)
	require.Contains(t, r.body, `"residentKey":"required"`)
	r = c.postJSON("/passkeys/enroll/finish", `{"id":"AAAA","rawId":"AAAA","type":"public-key","response":{}}`, "X-CSRF-Token", csrf)
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	r = c.postJSON("/passkeys/enroll/finish", `{}`, "X-CSRF-Token", csrf)
	require.Equal(t, http.StatusForbidden, r.code, "the ceremony was used by the bad answer: %s", r.body)
	require.Contains(t, r.body, "no passkey ceremony")

	anon := f.client()
	r = anon.postJSON("/login/passkey/finish", `{}`)
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, "no passkey ceremony")
	r = anon.postJSON("/login/passkey/begin", `{}`, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, r.code)
	r = anon.postJSON("/login/passkey/begin", `{"owner":"nobody"}`)
	require.Equal(t, http.StatusOK, r.code, "an owner without passkeys gets options all the same: %s", r.body)
	r = anon.postJSON("/login/passkey/finish", `not json`)
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	require.Equal(t, 2, auditRows(f, `action = 'sign-in' AND target = 'passkey' AND outcome = 'refused'`))
	require.Equal(t, 1, auditRows(f, `action = 'sign-in' AND target = 'passkey' AND actor = 'nobody' AND outcome = 'refused'`))
	require.Equal(t, 2, auditRows(f, `action = 'passkey enroll' AND actor = 'admin' AND outcome = 'refused'`))

	off := newFixture(t, web.Config{AdminToken: token})
	oc := off.client()
	require.Equal(t, http.StatusSeeOther, oc.login(token).code)
	for _, p := range []string{"/passkeys/enroll/begin", "/passkeys/enroll/finish", "/login/passkey/begin", "/login/passkey/finish"} {
		r := oc.postJSON(p, `{}`, "X-CSRF-Token", oc.csrf())
		require.Equal(t, http.StatusForbidden, r.code, p)
		require.Contains(t, r.body, "passkeys are off", p)
	}
	require.Equal(t, http.StatusForbidden, oc.get("/passkeys").code)
}
