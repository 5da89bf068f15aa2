package web

// What the passkey handlers need of the sessions and the audit log.

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"net/http"
	"time"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// breakGlassOwner is the owner of the dashboard's own admin token (--admin-token).
const breakGlassOwner = "admin"

// signedIn returns who the request's browser session is and the session's CSRF token.
func (s *Server) signedIn(r *http.Request) (principal, string, bool) {
	sess, ok := s.session(r)
	if !ok {
		return principal{}, "", false
	}
	return principal{Owner: breakGlassOwner, Role: "admin", Via: "session"}, s.csrfToken(sess), true
}

// startSessionFor signs the browser in as owner with role.
func (s *Server) startSessionFor(w http.ResponseWriter, r *http.Request, owner, role string) error {
	value, err := s.newSession(time.Now())
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: value, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r), MaxAge: int(sessionMaxAge / time.Second)})
	return nil
}

// jsonSession checks a ceremony request of a signed-in browser: its session, its CSRF token in
// X-CSRF-Token and its origin.
func (s *Server) jsonSession(r *http.Request) (principal, error) {
	if !s.passkeysOn() {
		return principal{}, forbidden("passkeys are off: start the dashboard with --passkey-rp-id (docs/security.md#passkeys)")
	}
	p, csrf, ok := s.signedIn(r)
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

// audit appends a row of the dashboard's to the audit log (docs/audit-log.md). A row that
// cannot be written is logged: the answer does not wait on it.
func (s *Server) audit(r *http.Request, actor, action, target, outcome string, err error) {
	row := dbsqlc.AuditLogAppendParams{Actor: actor, Surface: "web", Action: action, Target: target,
		Parameters: json.RawMessage(`{"remote":` + quoteJSON(clientAddr(r)) + `}`), Outcome: outcome}
	if err != nil {
		row.Error = err.Error()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if werr := dbsqlc.New(s.cfg.Base.Pool).AuditLogAppend(ctx, row); werr != nil {
		s.logger.Error("audit row not written", "action", action, "actor", actor, "error", werr)
	}
}

func quoteJSON(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}
