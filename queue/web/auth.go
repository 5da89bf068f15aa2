package web

// The admin's session: sign-in with the admin token, a signed session cookie, sign-out,
// and the CSRF token and origin check every action needs.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// SessionCookie names the admin session's cookie.
const SessionCookie = "cortexq_admin"

// sessionMaxAge is how long an admin session lasts.
const sessionMaxAge = 12 * time.Hour

// actionsAllowed reports whether any browser may act: a token is set and not --read-only.
func (s *Server) actionsAllowed() bool { return s.cfg.AdminToken != "" && !s.cfg.ReadOnly }

// tokenOK compares a token with the admin token in constant time (hashes first, so neither
// length shows).
func (s *Server) tokenOK(given string) bool {
	if !s.actionsAllowed() || given == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(s.cfg.AdminToken))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func (s *Server) mac(parts ...string) []byte {
	h := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// sessionIDLen is the length of a session's random id, which signing out revokes.
const sessionIDLen = 16

// newSession returns a session cookie's value: its expiry, a random id and a MAC of both.
func (s *Server) newSession(now time.Time) (string, error) {
	head := make([]byte, 8+sessionIDLen)
	binary.BigEndian.PutUint64(head, uint64(now.Add(sessionMaxAge).Unix()))
	if _, err := rand.Read(head[8:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(append(head, s.mac("session", string(head))...)), nil
}

// parseSession checks a session cookie's value: its MAC and expiry. It returns the session's
// id and expiry; it does not look at revocations.
func (s *Server) parseSession(value string) (string, time.Time, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) != 8+sessionIDLen+sha256.Size {
		return "", time.Time{}, false
	}
	head := raw[:8+sessionIDLen]
	if !hmac.Equal(raw[len(head):], s.mac("session", string(head))) {
		return "", time.Time{}, false
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(head[:8])), 0)
	if time.Now().After(exp) {
		return "", time.Time{}, false
	}
	return string(head[8:]), exp, true
}

// session returns the request's admin session, if it holds a valid one not signed out.
func (s *Server) session(r *http.Request) (string, bool) {
	if !s.actionsAllowed() {
		return "", false
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return "", false
	}
	id, _, ok := s.parseSession(c.Value)
	if !ok {
		return "", false
	}
	s.revokedMu.Lock()
	_, gone := s.revoked[id]
	s.revokedMu.Unlock()
	if gone {
		return "", false
	}
	return c.Value, true
}

// revoke signs a session out for good: a copy of its cookie kept elsewhere stops working too.
// Revocations last until the session would have expired (and until the dashboard restarts,
// which makes every session invalid with a new key).
func (s *Server) revoke(value string) {
	id, exp, ok := s.parseSession(value)
	if !ok {
		return
	}
	now := time.Now()
	s.revokedMu.Lock()
	defer s.revokedMu.Unlock()
	for k, e := range s.revoked {
		if now.After(e) {
			delete(s.revoked, k)
		}
	}
	s.revoked[id] = exp
}

// csrfToken is the hidden field of a session's forms.
func (s *Server) csrfToken(session string) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", session))
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

// action wraps an action: POST, allowed, an admin session, a matching CSRF token, the same
// origin. The handler's message is shown on a result page.
func (s *Server) action(fn func(*http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.formAllowed(w, r) {
			return
		}
		msg, err := fn(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.logger.Info("web action", "path", r.URL.Path, "result", msg)
		back := r.PostForm.Get("back")
		if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.HasPrefix(back, "/\\") {
			back = "/"
		}
		s.render(w, r, http.StatusOK, view{Page: "done", Title: "Done", Data: struct{ Msg, Back string }{msg, back}})
	}
}

// formAllowed checks a form action's request: actions allowed, an admin session, its CSRF token
// and the same origin; it answers the refusal itself.
func (s *Server) formAllowed(w http.ResponseWriter, r *http.Request) bool {
	if !s.actionsAllowed() {
		s.fail(w, r, forbidden("this dashboard is read-only: start it with --admin-token (and without --read-only) to act"))
		return false
	}
	sess, ok := s.session(r)
	if !ok {
		s.fail(w, r, forbidden("sign in with the admin token first (/login)"))
		return false
	}
	if err := parseForm(w, r); err != nil {
		s.fail(w, r, err)
		return false
	}
	given := r.PostForm.Get("csrf")
	if given == "" || !hmac.Equal([]byte(given), []byte(s.csrfToken(sess))) {
		s.fail(w, r, forbidden("missing or wrong CSRF token: reload the page and try again"))
		return false
	}
	if !sameOrigin(r) {
		s.fail(w, r, forbidden("cross-origin request refused"))
		return false
	}
	return true
}

func (s *Server) loginPage(r *http.Request) (view, error) {
	return view{Page: "login", Title: "Sign in", Data: struct{ Allowed, ReadOnly bool }{s.actionsAllowed(), s.cfg.ReadOnly}}, nil
}

// login checks the admin token and sets the session cookie (HttpOnly, SameSite=Strict).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.actionsAllowed() {
		s.fail(w, r, forbidden("this dashboard is read-only: there is nothing to sign in to"))
		return
	}
	if err := parseForm(w, r); err != nil {
		s.fail(w, r, err)
		return
	}
	if !sameOrigin(r) {
		s.fail(w, r, forbidden("cross-origin request refused"))
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		s.fail(w, r, badRequest("give the admin token"))
		return
	}
	addr := clientAddr(r)
	tooMany := func(wait time.Duration) {
		s.logger.Warn("web sign-in refused: too many failed attempts", "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", retryAfter(wait))
		s.fail(w, r, httpError{code: http.StatusTooManyRequests, msg: fmt.Sprintf("too many failed sign-ins: try again in %s", wait.Round(time.Second))})
	}
	// An address past its own limit is refused without its token compared. Past the overall
	// limit only, the token is compared: the right one signs in (so wrong guesses from elsewhere
	// never lock the admin out), a wrong one is refused as too many.
	own, all := s.signIn.take(addr)
	if own > 0 {
		tooMany(own)
		return
	}
	if !s.tokenOK(token) {
		if all > 0 {
			tooMany(all)
			return
		}
		s.logger.Warn("web sign-in refused: wrong token", "remote", r.RemoteAddr)
		s.fail(w, r, forbidden("wrong admin token"))
		return
	}
	s.signIn.refund(addr, all == 0)
	value, err := s.newSession(time.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: value, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r), MaxAge: int(sessionMaxAge / time.Second)})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout revokes the browser's session (a copy of the cookie stops working too) and clears it.
// From another origin it does nothing (403), like every action.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		s.fail(w, r, forbidden("cross-origin request refused"))
		return
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.revoke(c.Value)
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
