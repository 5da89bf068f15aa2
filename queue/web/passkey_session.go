package web

// What the passkey endpoints need of the sessions (auth.go) and the audit rows (roles.go).

import (
	"crypto/hmac"
	"net/http"
)

// passkeyMutations are the passkey routes, each a mutation with its audit row: enrolment and
// deletion need a session (any role: everyone manages their own passkeys; an admin others' too),
// sign-in none.
func (s *Server) passkeyMutations() []mutation {
	return []mutation{
		{"POST /passkeys/enroll/begin", "passkey enroll begin", s.enrollBegin},
		{"POST /passkeys/enroll/finish", "passkey enroll", s.enrollFinish},
		{"POST /passkeys/delete", "passkey delete", s.action(roleViewer, s.deletePasskey)},
		{"POST /login/passkey/begin", "passkey sign-in begin", s.loginBegin},
		{"POST /login/passkey/finish", "sign-in", s.loginFinish},
	}
}

// passkeySession returns who the request's browser session is and the session's CSRF token.
func (s *Server) passkeySession(r *http.Request) (principal, string, bool) {
	p, sess, ok := s.session(r)
	if !ok {
		return principal{}, "", false
	}
	return p, s.csrfToken(sess), true
}

// jsonSession checks a ceremony request of a signed-in browser: its session, its CSRF token in
// X-CSRF-Token and its origin.
func (s *Server) jsonSession(r *http.Request) (principal, error) {
	p, csrf, ok := s.passkeySession(r)
	if ok {
		noteOf(r).Actor = p.Owner
	}
	if !s.passkeysOn() {
		return principal{}, forbidden("passkeys are off: start the dashboard with --passkey-rp-id (docs/security.md#passkeys)")
	}
	if !ok {
		return principal{}, forbidden("sign in first (/login)")
	}
	given := r.Header.Get("X-CSRF-Token")
	if given == "" || !hmac.Equal([]byte(given), []byte(csrf)) {
		return principal{}, forbidden("missing or wrong CSRF token: reload the page and try again")
	}
	if !sameOrigin(r) {
		return principal{}, forbidden("cross-origin request refused")
	}
	return p, nil
}

// claimActor names a sign-in attempt's actor in its audit row before its owner is known: the
// owner of the browser's session, if it has one.
func (s *Server) claimActor(r *http.Request) {
	if p, _, ok := s.session(r); ok {
		noteOf(r).Actor = p.Owner
	}
}
