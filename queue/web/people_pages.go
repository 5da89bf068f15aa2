package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/cortexq/cortexq/queue/api"
)

// signedIn is the request's session, or a 403 asking to sign in.
func (s *Server) signedIn(r *http.Request) (principal, error) {
	if !s.actionsAllowed() {
		return principal{}, forbidden("this dashboard is read-only (--read-only): it has no sign-in, audit log or sessions")
	}
	p, _, ok := s.session(r)
	if !ok {
		return principal{}, forbidden("sign in first (/login): the audit log and the sessions are a signed-in viewer's")
	}
	return p, nil
}

// auditPage is the audit log, newest first, filtered by actor and since (a signed-in viewer's).
func (s *Server) auditPage(r *http.Request) (view, error) {
	if _, err := s.signedIn(r); err != nil {
		return view{}, err
	}
	rows, err := s.apiAudit(r, principal{})
	if api.IsParam(err) {
		err = badRequest("%v", err)
	}
	if err != nil {
		return view{}, err
	}
	q := r.URL.Query()
	list := rows.(api.AuditLog).Rows
	return view{Page: "audit", Title: "Audit log", Data: struct {
		Rows         []api.AuditRow
		Actor, Since string
		Listed       int
	}{list, q.Get("actor"), q.Get("since"), len(list)}}, nil
}

// sessionsPage lists the live sessions: the viewer's own, an admin's all.
func (s *Server) sessionsPage(r *http.Request) (view, error) {
	p, err := s.signedIn(r)
	if err != nil {
		return view{}, err
	}
	list, err := s.sessionsOf(r, p, "")
	if err != nil {
		return view{}, err
	}
	return view{Page: "sessions", Title: "Sessions", Data: struct {
		Sessions []api.Session
		Me       principal
	}{list, p}}, nil
}

// sessionRevoke ends a session (id) or every session of an owner: the signed-in owner's own, or
// anyone's for an admin.
func (s *Server) sessionRevoke(r *http.Request) (string, error) {
	p, _, _ := s.session(r)
	var ended api.Ended
	var err error
	if owner := r.PostForm.Get("owner"); owner != "" {
		ended, err = s.endOwnerSessions(r, p, owner)
	} else {
		id, perr := strconv.ParseInt(r.PostForm.Get("id"), 10, 64)
		if perr != nil || id <= 0 {
			return "", badRequest("session %q: want a positive number", r.PostForm.Get("id"))
		}
		ended, err = s.endSession(r, p, id)
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s ended", plural(int(ended.Sessions), "session", "sessions")), nil
}
