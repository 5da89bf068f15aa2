package web

// People: the audit log, sessions and tokens through the API (/api/v1/audit, /api/v1/sessions,
// /api/v1/tokens, /api/v1/owners/{owner}/...) and the dashboard (/audit, /sessions).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/audit"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// authed wraps a read that needs role (the audit log, sessions): in a slot, authorized as an
// action is, answered as JSON.
func (s *Server) authed(role string, fn func(*http.Request, principal) (any, error)) http.HandlerFunc {
	return s.inSlots(s.heavy, func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authorize(w, r, role)
		if err == nil {
			var v any
			if v, err = fn(r, p); err == nil {
				writeJSON(w, http.StatusOK, v)
				return
			}
		}
		s.apiFail(w, r, err)
	})
}

// auditQuery reads the audit log's filters: actor, since (a duration back, default a week),
// limit (default 1000, at most 10000).
func (s *Server) auditQuery(r *http.Request) ([]dbsqlc.AuditLog, error) {
	q := r.URL.Query()
	since, limit := 7*24*time.Hour, 1000
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, api.Paramf("since %q: want a positive duration such as 24h", v)
		}
		since = d
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10_000 {
			return nil, api.Paramf("limit %q: want 1 to 10000", v)
		}
		limit = n
	}
	var now time.Time
	if err := s.cfg.Base.Pool.QueryRow(r.Context(), `SELECT now()`).Scan(&now); err != nil {
		return nil, err
	}
	return audit.List(r.Context(), s.cfg.Base.Pool, now.Add(-since), q.Get("actor"), limit)
}

func (s *Server) apiAudit(r *http.Request, _ principal) (any, error) {
	rows, err := s.auditQuery(r)
	if err != nil {
		return nil, err
	}
	out := api.AuditLog{Rows: make([]api.AuditRow, 0, len(rows))}
	for _, a := range rows {
		row := api.AuditRow{ID: a.ID, At: a.At, DBRole: a.DbRole, Actor: a.Actor, Surface: a.Surface, Action: a.Action,
			Target: a.Target, Matched: a.Matched, Outcome: a.Outcome, Error: a.Error, Parameters: map[string]any{}}
		_ = json.Unmarshal(a.Parameters, &row.Parameters) // jsonb: always an object cortexq wrote
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// sessionsOf lists the live sessions p may see: its own, or an admin's pick (owner; "" all).
func (s *Server) sessionsOf(r *http.Request, p principal, owner string) ([]api.Session, error) {
	if owner == "" && p.Role != roleAdmin {
		owner = p.Owner
	}
	if owner != p.Owner {
		if err := p.may(roleAdmin); err != nil {
			return nil, err
		}
	}
	var o *string
	if owner != "" {
		o = &owner
	}
	rows, err := dbsqlc.New(s.cfg.Base.Pool).SessionList(r.Context(), o, false, 1000)
	out := make([]api.Session, 0, len(rows))
	for _, x := range rows {
		out = append(out, api.Session{ID: x.ID, Owner: x.Owner, Role: x.Role, TokenID: x.TokenID, StartedAt: x.StartedAt,
			LastSeen: x.LastSeen, ExpiresAt: x.ExpiresAt, Remote: x.Remote, UserAgent: x.UserAgent, EndedAt: x.EndedAt,
			EndedWhy: x.EndedWhy, Current: x.ID == p.SessionID})
	}
	return out, err
}

func (s *Server) apiSessions(r *http.Request, p principal) (any, error) {
	list, err := s.sessionsOf(r, p, r.URL.Query().Get("owner"))
	return api.Sessions{Sessions: list}, err
}

// endSession ends session id: p's own, or anyone's for an admin.
func (s *Server) endSession(r *http.Request, p principal, id int64) (api.Ended, error) {
	q := dbsqlc.New(s.cfg.Base.Pool)
	owner, err := q.SessionOwner(r.Context(), id)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Ended{}, httpError{code: http.StatusNotFound, msg: fmt.Sprintf("session %d: no such session", id)}
	}
	if err != nil {
		return api.Ended{}, err
	}
	noteOf(r).Target = fmt.Sprintf("session %d of owner %s", id, owner)
	if owner != p.Owner {
		if err := p.may(roleAdmin); err != nil {
			return api.Ended{}, err
		}
	}
	n, err := q.SessionRevoke(r.Context(), "revoked by "+p.Owner, &id, nil, nil)
	return api.Ended{Sessions: n}, err
}

// endOwnerSessions ends every session of owner: p's own, or anyone's for an admin.
func (s *Server) endOwnerSessions(r *http.Request, p principal, owner string) (api.Ended, error) {
	if owner != p.Owner {
		if err := p.may(roleAdmin); err != nil {
			return api.Ended{}, err
		}
	}
	n, err := dbsqlc.New(s.cfg.Base.Pool).SessionRevoke(r.Context(), "revoked by "+p.Owner, nil, &owner, nil)
	return api.Ended{Sessions: n}, err
}

func (s *Server) apiSessionRevoke(r *http.Request, p principal) (any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, api.Paramf("session %q: want a positive number", r.PathValue("id"))
	}
	return s.endSession(r, p, id)
}

func (s *Server) apiOwnerSessionsRevoke(r *http.Request, p principal) (any, error) {
	return s.endOwnerSessions(r, p, r.PathValue("owner"))
}

func (s *Server) apiOwnerTokensRevoke(r *http.Request, _ principal) (any, error) {
	owner := r.PathValue("owner")
	t, n, err := audit.RevokeTokens(r.Context(), s.cfg.Base.Pool, nil, &owner)
	return api.Ended{Tokens: t, Sessions: n}, err
}

func (s *Server) apiTokenRevoke(r *http.Request, _ principal) (any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, api.Paramf("token %q: want a positive number", r.PathValue("id"))
	}
	noteOf(r).Target = fmt.Sprintf("token %d", id)
	t, n, err := audit.RevokeTokens(r.Context(), s.cfg.Base.Pool, &id, nil)
	if err == nil && t == 0 {
		return nil, httpError{code: http.StatusNotFound, msg: fmt.Sprintf("token %d: no such token, or revoked already", id)}
	}
	return api.Ended{Tokens: t, Sessions: n}, err
}

func (s *Server) apiTokenCreate(r *http.Request, _ principal) (any, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var req api.TokenRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, notText("the body: want a JSON object {owner, role, expires}: %v", err)
	}
	n := noteOf(r)
	n.Params["owner"], n.Params["role"], n.Params["expires"] = req.Owner, req.Role, req.Expires
	if !audit.OwnerName.MatchString(req.Owner) {
		return nil, api.Paramf("owner %q: want 1-64 letters, digits, '.', '_', '@' or '-'", req.Owner)
	}
	if !audit.Roles[req.Role] {
		return nil, api.Paramf("role %q: want viewer, operator or admin", req.Role)
	}
	if req.Expires < 0 || req.Expires > 100*365*24*3600 {
		return nil, api.Paramf("expires %d: want seconds, 0 for never", req.Expires)
	}
	m, err := audit.MintToken(r.Context(), s.cfg.Base.Pool, req.Owner, req.Role, time.Duration(req.Expires)*time.Second)
	if err != nil {
		return nil, err
	}
	n.Target = fmt.Sprintf("token %d of owner %s", m.ID, req.Owner)
	return api.TokenMade{ID: m.ID, Owner: req.Owner, Role: req.Role, Token: m.Token, ExpiresAt: m.ExpiresAt}, nil
}
