package web

// Who may act through the API: one middleware (apiAction) that finds who a request is (a bearer
// token or a browser session) and refuses a role below the route's.

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// authorize finds who a request acts as, or refuses it: actions off (--read-only) 403
// read_only; a bearer token that is no one's (or revoked, or expired) 401 (rate limited as
// sign-ins are, 429 past it); a browser session without its CSRF token in X-CSRF-Token, or from
// another origin, 403; nothing 401; a role below role 403. CSRF is checked for cookie sessions
// only, and only for what is not a GET: a bearer token is never sent by a browser on its own.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, role string) (principal, error) {
	if !s.actionsAllowed() {
		return principal{}, apiError{http.StatusForbidden, "read_only", "this dashboard is read-only (--read-only)"}
	}
	var p principal
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return principal{}, s.unauthorized(w, "Authorization: want Bearer and a token")
		}
		var err error
		if p, err = s.signInWith(w, r, strings.TrimSpace(tok), "", http.StatusUnauthorized); err != nil {
			var he httpError
			if errors.As(err, &he) && he.code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="cortexq"`)
			}
			return principal{}, err
		}
		p.Via = "bearer"
	} else {
		var sess string
		var ok bool
		if p, sess, ok = s.session(r); !ok {
			return principal{}, s.unauthorized(w, "send a token as Authorization: Bearer TOKEN (or sign in)")
		}
		noteOf(r).Actor = p.Owner
		given := r.Header.Get("X-CSRF-Token")
		if r.Method != http.MethodGet && (given == "" || !hmac.Equal([]byte(given), []byte(s.csrfToken(sess)))) {
			return principal{}, forbidden("a browser session's action needs its CSRF token in X-CSRF-Token")
		}
		if !sameOrigin(r) {
			return principal{}, forbidden("cross-origin request refused")
		}
	}
	return p, p.may(role)
}

func (s *Server) unauthorized(w http.ResponseWriter, msg string) error {
	w.Header().Set("WWW-Authenticate", `Bearer realm="cortexq"`)
	return httpError{code: http.StatusUnauthorized, msg: msg}
}

// maxBodyBytes bounds an action's body, as a form's.
const maxBodyBytes = maxFormBytes

// apiAction wraps an action that needs role: authorize, read its body (at most maxBodyBytes),
// act, log who did what, and answer its result.
func (s *Server) apiAction(role string, fn func(*http.Request, principal) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authorize(w, r, role)
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
