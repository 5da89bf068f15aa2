package web

// Who is signed in: a person's token (cortexq token create, api_tokens) or the break-glass
// admin token signs a browser in to a server-side session (web_sessions, migration 00036);
// sign-out, revocation and the CSRF token and origin check every action needs. Roles and the
// audit rows are in roles.go.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue/text"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// SessionCookie names the session's cookie: a random id, of which the database keeps only the
// SHA-256 digest.
const SessionCookie = "cortexq_session"

// sessionMaxAge is how long a session lasts.
const sessionMaxAge = 12 * time.Hour

// AdminOwner is the owner the file/env admin token (--admin-token) acts as: the break-glass
// account, an admin.
const AdminOwner = "admin"

// actionsAllowed reports whether anyone may act: not --read-only.
func (s *Server) actionsAllowed() bool { return !s.cfg.ReadOnly }

// adminTokenOK compares a token with the admin token in constant time (hashes first, so neither
// length shows). No admin token set: none matches.
func (s *Server) adminTokenOK(given string) bool {
	if s.cfg.AdminToken == "" || given == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(s.cfg.AdminToken))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// errWrongToken is a token that is neither the admin token nor any person's.
var errWrongToken = errors.New("wrong token")

// tokenError is a person's token that no longer works; Owner is whose it was.
type tokenError struct{ Owner, why string }

func (e tokenError) Error() string { return e.why }

// tokenPrincipal finds who a token is: the admin token is the owner admin; a person's token is
// looked up by its SHA-256 digest in api_tokens. A revoked or expired one is a tokenError, an
// unknown one errWrongToken.
func (s *Server) tokenPrincipal(ctx context.Context, tok string) (principal, error) {
	if s.adminTokenOK(tok) {
		return principal{Owner: AdminOwner, Role: roleAdmin}, nil
	}
	d := sha256.Sum256([]byte(tok))
	row, err := dbsqlc.New(s.cfg.Base.Pool).TokenByDigest(ctx, d[:])
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return principal{}, errWrongToken
	case err != nil:
		return principal{}, err
	case row.RevokedAt != nil:
		return principal{}, tokenError{row.Owner, fmt.Sprintf("token %d of %s was revoked", row.ID, row.Owner)}
	case !row.Usable:
		return principal{}, tokenError{row.Owner, fmt.Sprintf("token %d of %s has expired", row.ID, row.Owner)}
	}
	return principal{Owner: row.Owner, Role: row.Role, TokenID: row.ID}, nil
}

// sessionDigest is what the database keeps of a session's cookie.
func sessionDigest(value string) []byte {
	d := sha256.Sum256([]byte(value))
	return d[:]
}

// maxUserAgent bounds the user agent a session records.
const maxUserAgent = 200

// startSession starts a server-side session for owner with role (tokenID: the api_tokens row it
// signed in with; 0 for the admin token or a passkey) and sets its cookie on w: a random id
// (256 bits) of which the database keeps the SHA-256 digest, with the client's address and user
// agent. It is how every sign-in ends (the token form here, a passkey's too).
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, owner, role string, tokenID int64) error {
	if !validRole(role) {
		return fmt.Errorf("start a session: role %q", role)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	value := base64.RawURLEncoding.EncodeToString(raw)
	var tid *int64
	if tokenID > 0 {
		tid = &tokenID
	}
	ua := text.Printable(r.UserAgent())
	if len(ua) > maxUserAgent {
		ua = strings.ToValidUTF8(ua[:maxUserAgent], "")
	}
	_, err := dbsqlc.New(s.cfg.Base.Pool).SessionStart(r.Context(), dbsqlc.SessionStartParams{Digest: sessionDigest(value),
		Owner: owner, Role: role, TokenID: tid, TtlSeconds: int64(sessionMaxAge / time.Second), Remote: clientAddr(r), UserAgent: ua})
	if err != nil {
		return fmt.Errorf("start a session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: value, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r), MaxAge: int(sessionMaxAge / time.Second)})
	return nil
}

// session returns the request's live session: its principal and cookie value. A session is
// live until signed out, revoked, its token revoked or expired, or its own expiry (all read
// from the database on each request, so a revocation holds at the next one).
func (s *Server) session(r *http.Request) (principal, string, bool) {
	if !s.actionsAllowed() {
		return principal{}, "", false
	}
	if p, ok := r.Context().Value(sessionKey{}).(*sessionMemo); ok && p.done {
		return p.p, p.value, p.ok
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil || len(c.Value) != 43 {
		return principal{}, "", false
	}
	row, err := dbsqlc.New(s.cfg.Base.Pool).SessionTouch(r.Context(), sessionDigest(c.Value))
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) && !errors.Is(err, context.Canceled) {
			s.logger.Warn("read a session", "error", err)
		}
		return principal{}, "", false
	}
	p := principal{Owner: row.Owner, Role: row.Role, Via: "session", SessionID: row.ID}
	if row.TokenID != nil {
		p.TokenID = *row.TokenID
	}
	if m, ok := r.Context().Value(sessionKey{}).(*sessionMemo); ok {
		*m = sessionMemo{done: true, p: p, value: c.Value, ok: true}
	}
	return p, c.Value, true
}

// sessionKey keys a request's sessionMemo: the session read once per request.
type sessionKey struct{}

type sessionMemo struct {
	done, ok bool
	p        principal
	value    string
}

// csrfToken is the hidden field of a session's forms: a keyed hash of the session's cookie (256
// random bits, HttpOnly), so that every dashboard of the database, before and after a restart,
// makes and checks the same one, and it reveals nothing of the cookie.
func (s *Server) csrfToken(session string) string {
	h := hmac.New(sha256.New, []byte("cortexq csrf"))
	h.Write([]byte(session))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// sameOrigin refuses a request whose Origin (or, without one, Referer) names another host.
func sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" {
		return true // not a browser's cross-site form: the CSRF token still has to match
	}
	u, err := url.Parse(src)
	if err != nil || u.Host == "" {
		return false
	}
	host := r.Host
	if fwd := r.Header.Get("X-Forwarded-Host"); fwd != "" {
		host = fwd
	}
	return strings.EqualFold(u.Host, host)
}

// action wraps a dashboard action that needs role: POST, allowed, a session of that role or
// above, a matching CSRF token, the same origin (formAllowed). The handler's message is shown on
// a result page.
func (s *Server) action(role string, fn func(*http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.formAllowed(w, r, role)
		if !ok {
			return
		}
		msg, err := fn(r)
		var ask askFirst
		if errors.As(err, &ask) {
			ask.Back = safeBack(ask.Back)
			s.render(w, r, http.StatusOK, view{Page: "confirm", Title: "Confirm", Data: ask})
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.logger.Info("web action", "path", r.URL.Path, "owner", p.Owner, "result", msg)
		s.render(w, r, http.StatusOK, view{Page: "done", Title: "Done", Data: struct{ Msg, Back string }{msg, safeBack(r.PostForm.Get("back"))}})
	}
}

// formAllowed checks a form action's request: actions allowed, a session of role or above, its
// CSRF token and the same origin, noting the actor and the form on the audit row. It answers a
// refusal itself (ok false).
func (s *Server) formAllowed(w http.ResponseWriter, r *http.Request, role string) (p principal, ok bool) {
	if !s.actionsAllowed() {
		s.fail(w, r, forbidden("this dashboard is read-only (--read-only): it has no actions"))
		return p, false
	}
	p, sess, ok := s.session(r)
	if !ok {
		s.fail(w, r, forbidden("sign in first (/login)"))
		return p, false
	}
	noteOf(r).Actor = p.Owner
	if err := parseForm(w, r); err != nil {
		s.fail(w, r, err)
		return p, false
	}
	noteOf(r).form(r.PostForm)
	given := r.PostForm.Get("csrf")
	if given == "" || !hmac.Equal([]byte(given), []byte(s.csrfToken(sess))) {
		s.fail(w, r, forbidden("missing or wrong CSRF token: reload the page and try again"))
		return p, false
	}
	if !sameOrigin(r) {
		s.fail(w, r, forbidden("cross-origin request refused"))
		return p, false
	}
	if err := p.may(role); err != nil {
		s.fail(w, r, err)
		return p, false
	}
	return p, true
}

// safeBack is a form's back link if it is a path of this site, else the overview.
func safeBack(back string) string {
	if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.HasPrefix(back, "/\\") {
		return "/"
	}
	return back
}

func (s *Server) loginPage(r *http.Request) (view, error) {
	return view{Page: "login", Title: "Sign in", Data: struct{ Allowed, ReadOnly, Passkeys bool }{s.actionsAllowed(), s.cfg.ReadOnly, s.passkeysOn()}}, nil
}

// login checks a token (a person's or the admin token) and starts a session (cookie HttpOnly,
// SameSite=Strict). Failed attempts are limited per address and per owner (ratelimit.go).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.actionsAllowed() {
		s.fail(w, r, forbidden("this dashboard is read-only (--read-only): there is nothing to sign in to"))
		return
	}
	if err := parseForm(w, r); err != nil {
		s.fail(w, r, err)
		return
	}
	noteOf(r).form(r.PostForm)
	if !sameOrigin(r) {
		s.fail(w, r, forbidden("cross-origin request refused"))
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		s.fail(w, r, badRequest("give a token: yours (cortexq token create) or the admin token"))
		return
	}
	p, err := s.signInWith(w, r, token, r.PostForm.Get("owner"), http.StatusForbidden)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.startSession(w, r, p.Owner, p.Role, p.TokenID); err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout ends the browser's session (a copy of the cookie stops working too) and clears it.
// From another origin it does nothing (403), like every action.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		s.fail(w, r, forbidden("cross-origin request refused"))
		return
	}
	if p, value, ok := s.session(r); ok {
		noteOf(r).Actor = p.Owner
		if _, err := dbsqlc.New(s.cfg.Base.Pool).SessionEnd(r.Context(), "signed out", sessionDigest(value)); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r), MaxAge: -1})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// secure reports whether the browser reached us over HTTPS (directly or through a proxy that
// says so), so the cookie is marked Secure.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
