package web

// Who may act through the API: one middleware (apiAction), so that per-person tokens, roles and
// an audit trail can be added in one place.

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// principal is who an API action acts as. Today there is one: the holder of the dashboard's
// admin token, by bearer token or signed-in browser session.
type principal struct {
	Owner string // who: "admin" for the admin token
	Role  string // what it may do: "admin" may take every action
	Via   string // "bearer" or "session"
}

// authorize finds who a request acts as, or refuses it: actions off (--read-only, no token)
// 403 read_only; a bearer token that is not the admin token 401 (rate limited as sign-ins are,
// 429 past it); a browser session without its CSRF token in X-CSRF-Token, or from another
// origin, 403; nothing 401. CSRF is checked for cookie sessions only: a bearer token is never
// sent by a browser on its own.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) (principal, error) {
	if !s.actionsAllowed() {
		why := "this dashboard is read-only (--read-only)"
		if !s.cfg.ReadOnly {
			why = "this dashboard has no admin token: start it with --admin-token to allow actions"
		}
		return principal{}, apiError{http.StatusForbidden, "read_only", why}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return principal{}, s.unauthorized(w, "Authorization: want Bearer and the admin token")
		}
		return s.bearer(w, r, strings.TrimSpace(tok))
	}
	sess, ok := s.session(r)
	if !ok {
		return principal{}, s.unauthorized(w, "send the admin token as Authorization: Bearer TOKEN")
	}
	given := r.Header.Get("X-CSRF-Token")
	if given == "" || !hmac.Equal([]byte(given), []byte(s.csrfToken(sess))) {
		return principal{}, forbidden("a browser session's action needs its CSRF token in X-CSRF-Token")
	}
	if !sameOrigin(r) {
		return principal{}, forbidden("cross-origin request refused")
	}
	return principal{Owner: "admin", Role: "admin", Via: "session"}, nil
}

// bearer checks a bearer token, limited as sign-ins are (ratelimit.go): an address past its
// limit is refused without the token compared.
func (s *Server) bearer(w http.ResponseWriter, r *http.Request, tok string) (principal, error) {
	addr := clientAddr(r)
	own, all := s.signIn.take(addr)
	tooMany := func(wait time.Duration) error {
		s.logger.Warn("api token refused: too many wrong tokens", "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", retryAfter(wait))
		return httpError{code: http.StatusTooManyRequests, msg: fmt.Sprintf("too many wrong tokens: try again in %s", wait.Round(time.Second))}
	}
	if own > 0 {
		return principal{}, tooMany(own)
	}
	if !s.tokenOK(tok) {
		if all > 0 {
			return principal{}, tooMany(all)
		}
		s.logger.Warn("api token refused: wrong token", "remote", r.RemoteAddr)
		return principal{}, s.unauthorized(w, "wrong token")
	}
	s.signIn.refund(addr, all == 0)
	return principal{Owner: "admin", Role: "admin", Via: "bearer"}, nil
}

func (s *Server) unauthorized(w http.ResponseWriter, msg string) error {
	w.Header().Set("WWW-Authenticate", `Bearer realm="cortexq"`)
	return httpError{code: http.StatusUnauthorized, msg: msg}
}

// maxBodyBytes bounds an action's body, as a form's.
const maxBodyBytes = maxFormBytes

// apiAction wraps an action: authorize, read its body (at most maxBodyBytes), act, log who did
// what, and answer its result.
func (s *Server) apiAction(fn func(*http.Request, principal) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authorize(w, r)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		v, err := fn(r, p)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = httpError{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("the body is over %d bytes", maxBodyBytes)}
		}
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		s.logger.Info("api action", "method", r.Method, "path", r.URL.Path, "owner", p.Owner, "via", p.Via)
		code, v := actionAnswer(v)
		writeJSON(w, code, v)
	}
}
