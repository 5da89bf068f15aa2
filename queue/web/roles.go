package web

// Roles and the audit trail of the dashboard and the API: every mutating route is registered
// through mutate (with the audit row's action) and checks the least role it needs in one place,
// the route tables (webMutations, apiRouteTable). A test walks the router's patterns and drives
// every one that is not a GET.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue/audit"
)

// The roles, each allowed what the one before it is: a viewer reads (the audit log, its own
// sessions); an operator also reruns, pauses, resumes and makes sandboxes; an admin also
// deletes, manages tokens and others' sessions and passkeys.
const (
	roleViewer   = "viewer"
	roleOperator = "operator"
	roleAdmin    = "admin"
)

var roleRank = map[string]int{roleViewer: 1, roleOperator: 2, roleAdmin: 3}

func validRole(role string) bool { return roleRank[role] > 0 }

// principal is who a request acts as: an owner with a role, by bearer token or session.
type principal struct {
	Owner     string // who: "admin" for the admin token
	Role      string // viewer, operator or admin
	Via       string // "bearer" or "session"
	TokenID   int64  // the api_tokens row (0: the admin token, or a passkey's session)
	SessionID int64  // the web_sessions row of a session
}

// may refuses (403) a principal whose role is below role.
func (p principal) may(role string) error {
	if roleRank[p.Role] >= roleRank[role] {
		return nil
	}
	return forbidden("%s signed in as %s: this action needs the role %s (ask an admin for a token with --role %s)",
		p.Owner, p.Role, role, role)
}

// auditNote is what a mutating request tells its audit row: the handlers fill it in as they
// learn who acts and what they act on.
type auditNote struct {
	// Action, when set, names the action in place of the route's (a form of several steps).
	Action  string
	Actor   string
	Target  string
	Params  map[string]any
	Matched *int64
	DryRun  bool
	Err     string
}

type noteKey struct{}

// noteOf returns the request's audit note (a throwaway one outside a mutating route).
func noteOf(r *http.Request) *auditNote {
	if n, ok := r.Context().Value(noteKey{}).(*auditNote); ok {
		return n
	}
	return &auditNote{Params: map[string]any{}}
}

func (n *auditNote) matched(tasks int64) { n.Matched = &tasks }

// secretFields are form fields never recorded.
var secretFields = map[string]bool{"csrf": true, "token": true, "back": true}

// form records a form's fields as the row's parameters, but its secrets.
func (n *auditNote) form(v url.Values) {
	for k, vs := range v {
		if !secretFields[k] {
			n.Params[k] = strings.Join(vs, ",")
		}
	}
}

// targetFields name what a mutation acts on, in the order a target names them.
var targetFields = []string{"corpus", "service", "task", "id", "name", "owner"}

// target names what the parameters say the action acts on: "corpus arxiv, service tex_to_html".
func (n *auditNote) target() string {
	var parts []string
	for _, k := range targetFields {
		if v, ok := n.Params[k].(string); ok && v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	return strings.Join(parts, ", ")
}

// mutation is a route that changes something: its pattern, the action its audit row names, and
// its handler (which checks the role itself: action, apiAction).
type mutation struct {
	pattern string
	action  string
	h       http.HandlerFunc
}

// handle registers a route and remembers its pattern (Patterns).
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, h)
}

// mutate registers a dashboard's mutating route, every request of which appends an audit row.
func (s *Server) mutate(m mutation) { s.handle(m.pattern, s.audited(audit.Web, m.action, m.h)) }

// webMutations are the dashboard's mutating routes, each with the least role it needs.
func (s *Server) webMutations() []mutation {
	return []mutation{
		{"POST /login", "sign-in", s.login},
		{"POST /logout", "sign-out", s.logout},
		{"POST /rerun-task", "rerun task", s.action(roleOperator, s.rerunTask)},
		{"POST /rerun", "rerun", s.action(roleOperator, s.rerun)},
		{"POST /pause", "pause", s.action(roleOperator, s.pause)},
		{"POST /resume", "resume", s.action(roleOperator, s.resume)},
		{"POST /sandbox", "sandbox create", s.action(roleOperator, s.sandbox)},
		{"POST /sessions/revoke", "session revoke", s.action(roleViewer, s.sessionRevoke)},
		{"POST /lifecycle", "lifecycle", s.lifecycleForm},
		{"POST /jobs/cancel", "jobs cancel", s.action(roleOperator, s.cancelJob)},
	}
}

// audited runs a mutating route's handler and appends its audit row before the answer leaves:
// the answer is held (mutations answer little), so a client that has it finds the row. The
// outcome follows the status: 5xx failed, 4xx refused, else ok (dry_run for a preview).
func (s *Server) audited(surface, action string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := &auditNote{Params: map[string]any{}}
		for _, seg := range strings.Split(r.Pattern, "/") {
			if name, ok := strings.CutPrefix(seg, "{"); ok {
				name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "...")
				n.Params[name] = r.PathValue(name)
			}
		}
		ctx := context.WithValue(context.WithValue(r.Context(), noteKey{}, n), sessionKey{}, &sessionMemo{})
		hw := &heldWriter{w: w}
		h(hw, r.WithContext(ctx))
		row := audit.Row{Actor: n.Actor, Surface: surface, Action: action, Target: n.Target, Parameters: n.Params,
			Matched: n.Matched, Outcome: audit.OK, Error: n.Err}
		if row.Target == "" {
			row.Target = n.target()
		}
		if n.Action != "" {
			row.Action = n.Action
		}
		switch code := hw.status(); {
		case code >= 500:
			row.Outcome = audit.Failed
		case code >= 400:
			row.Outcome = audit.Refused
		case n.DryRun:
			row.Outcome = audit.DryRun
		}
		if s.cfg.ReadOnly {
			// Read-only sessions cannot write it: the log has the refusal.
			s.logger.Info("refused on a read-only dashboard", "surface", surface, "action", action, "remote", r.RemoteAddr)
		} else if err := audit.Append(ctx, s.cfg.Base.Pool, row); err != nil {
			s.logger.Error("audit row not written", "surface", surface, "action", action, "actor", row.Actor, "error", err)
		}
		hw.flush()
	}
}

// heldWriter holds an answer until flush.
type heldWriter struct {
	w    http.ResponseWriter
	code int
	body bytes.Buffer
}

func (h *heldWriter) Header() http.Header { return h.w.Header() }

func (h *heldWriter) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}

func (h *heldWriter) Write(b []byte) (int, error) {
	if h.code == 0 {
		h.code = http.StatusOK
	}
	return h.body.Write(b)
}

func (h *heldWriter) status() int {
	if h.code == 0 {
		return http.StatusOK
	}
	return h.code
}

func (h *heldWriter) flush() {
	h.w.WriteHeader(h.status())
	_, _ = h.w.Write(h.body.Bytes())
}

// signInWith finds who a token is, within the sign-in limits (ratelimit.go): an address or a
// named owner past its limit is refused 429 without the token compared; past the overall limit
// a wrong token is refused 429 too, the right one still works. claimed is the owner the client
// says it is ("" none); a wrong token then counts against that owner as well. wrong is the
// status of a wrong token (403 for the sign-in form, 401 for a bearer).
func (s *Server) signInWith(w http.ResponseWriter, r *http.Request, token, claimed string, wrong int) (principal, error) {
	addr := clientAddr(r)
	n := noteOf(r)
	n.Actor = claimed
	tooMany := func(wait time.Duration) error {
		s.logger.Warn("sign-in refused: too many failed attempts", "remote", r.RemoteAddr, "owner", claimed)
		w.Header().Set("Retry-After", retryAfter(wait))
		return httpError{code: http.StatusTooManyRequests, msg: fmt.Sprintf("too many failed sign-ins: try again in %s", wait.Round(time.Second))}
	}
	own, all := s.signIn.take(addr, claimed)
	if own > 0 {
		return principal{}, tooMany(own)
	}
	p, err := s.tokenPrincipal(r.Context(), token)
	if err == nil && claimed != "" && claimed != p.Owner {
		err = errWrongToken
	}
	var te tokenError
	switch {
	case errors.As(err, &te):
		if claimed == "" {
			n.Actor = te.Owner
			s.signIn.charge(te.Owner)
		}
		if all > 0 {
			return principal{}, tooMany(all)
		}
		s.logger.Warn("sign-in refused", "remote", r.RemoteAddr, "owner", te.Owner, "why", te.why)
		return principal{}, httpError{code: wrong, msg: te.why}
	case errors.Is(err, errWrongToken):
		if all > 0 {
			return principal{}, tooMany(all)
		}
		s.logger.Warn("sign-in refused: wrong token", "remote", r.RemoteAddr)
		return principal{}, httpError{code: wrong, msg: "wrong token: give your own (cortexq token create) or the admin token"}
	case err != nil:
		return principal{}, err
	}
	n.Actor = p.Owner
	if claimed == "" { // a named owner's lock was checked by take
		if wait := s.signIn.locked(p.Owner); wait > 0 {
			return principal{}, tooMany(wait)
		}
	}
	s.signIn.refund(addr, claimed, all == 0)
	return p, nil
}
