package web

// Background jobs (queue/jobs) on the dashboard and the API: the /jobs page with a cancel button,
// GET /api/v1/jobs and /api/v1/jobs/{id}, POST /api/v1/jobs (enqueue, 202) and
// /api/v1/jobs/{id}/cancel.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/jobs"
)

// jobsRoutes are the API's job endpoints (apiRouteTable appends them).
func (s *Server) jobsRoutes(read func(apiFunc) http.HandlerFunc, act func(action, role string, fn func(*http.Request, principal) (any, error)) http.HandlerFunc) []apiRoute {
	return []apiRoute{
		{"GET", "/api/v1/jobs", read(s.apiJobs)},
		{"POST", "/api/v1/jobs", act("job enqueue", roleOperator, s.apiJobEnqueue)},
		{"GET", "/api/v1/jobs/{id}", read(s.apiJob)},
		{"POST", "/api/v1/jobs/{id}/cancel", act("jobs cancel", roleOperator, s.apiJobCancel)},
	}
}

// accepted is an action's answer that is 202 Accepted: a job enqueued.
type accepted struct{ v any }

// actionAnswer unwraps an action's answer and its status.
func actionAnswer(v any) (int, any) {
	if a, ok := v.(accepted); ok {
		return http.StatusAccepted, a.v
	}
	return http.StatusOK, v
}

func jobParam(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, api.Paramf("job id %q: want a positive number", r.PathValue("id"))
	}
	return id, nil
}

func jobErr(err error) error {
	if errors.Is(err, jobs.ErrNotFound) {
		return httpError{code: http.StatusNotFound, msg: err.Error()}
	}
	return err
}

func (s *Server) apiJobs(r *http.Request) (any, error) {
	q := r.URL.Query()
	active := false
	switch v := q.Get("active"); v {
	case "", "false", "0":
	case "true", "1":
		active = true
	default:
		return nil, api.Paramf("active %q: want true or false", v)
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return nil, api.Paramf("limit %q: want 1 to 1000", v)
		}
		limit = n
	}
	list, err := jobs.List(r.Context(), s.cfg.Base.Pool, active, limit)
	if err != nil {
		return nil, err
	}
	return struct {
		Jobs []jobs.Job `json:"jobs"`
	}{list}, nil
}

func (s *Server) apiJob(r *http.Request) (any, error) {
	id, err := jobParam(r)
	if err != nil {
		return nil, err
	}
	j, err := jobs.Get(r.Context(), s.cfg.Base.Pool, id)
	return j, jobErr(err)
}

// jobRequest is POST /api/v1/jobs's body.
type jobRequest struct {
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args"`
	TimeoutSeconds float64         `json:"timeout_seconds"`
}

func (s *Server) apiJobEnqueue(r *http.Request, p principal) (any, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, notText("the body is not UTF-8 text")
	}
	var req jobRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, notText("the body: want a JSON object {kind, args, timeout_seconds}: %v", err)
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > 86400 {
		return nil, api.Paramf("timeout_seconds: want 0 (the default, 30) to 86400")
	}
	id, err := s.enqueueJob(r, p, req)
	if err != nil {
		return nil, err
	}
	return jobAccepted(id, req.Kind), nil
}

// jobAccepted is the answer of an action that enqueued job id: 202 with its handle.
func jobAccepted(id int64, kind string) accepted {
	return accepted{api.JobAccepted{ID: id, Kind: kind, State: "queued", Href: fmt.Sprintf("/api/v1/jobs/%d", id)}}
}

// enqueueJob enqueues req for p; a bad kind or bad arguments are a 422.
func (s *Server) enqueueJob(r *http.Request, p principal, req jobRequest) (int64, error) {
	if s.cfg.Jobs == nil {
		return 0, httpError{code: http.StatusServiceUnavailable, msg: "this dashboard takes no jobs"}
	}
	if jobops.AdminKinds[req.Kind] {
		if err := p.may(roleAdmin); err != nil {
			return 0, err // a job that deletes is an admin's, as the action is
		}
	}
	if err := s.cfg.Jobs.Check(req.Kind, req.Args); err != nil {
		return 0, api.Paramf("%v", err)
	}
	surface := "api"
	if p.Via == "session" {
		surface = "web"
	}
	return jobs.Enqueue(r.Context(), s.cfg.Base.Pool, s.cfg.Jobs, jobs.Request{Kind: req.Kind, Args: req.Args,
		Actor: p.Owner, Surface: surface, Timeout: time.Duration(req.TimeoutSeconds * float64(time.Second))})
}

func (s *Server) apiJobCancel(r *http.Request, _ principal) (any, error) {
	id, err := jobParam(r)
	if err != nil {
		return nil, err
	}
	state, err := jobs.Cancel(r.Context(), s.cfg.Base.Pool, id)
	if err != nil {
		return nil, jobErr(err)
	}
	return api.JobCancelled{ID: id, State: state}, nil
}

// jobsPage lists the jobs: the active ones, then the newest finished.
func (s *Server) jobsPage(r *http.Request) (view, error) {
	list, err := jobs.List(r.Context(), s.cfg.Base.Pool, false, 200)
	if err != nil {
		return view{}, err
	}
	var active, done []jobs.Job
	for _, j := range list {
		if j.Active() {
			active = append(active, j)
		} else {
			done = append(done, j)
		}
	}
	return view{Page: "jobs", Title: "Jobs", Data: struct{ Active, Done []jobs.Job }{active, done}}, nil
}

// cancelJob is the /jobs page's cancel button.
func (s *Server) cancelJob(r *http.Request) (string, error) {
	id, err := strconv.ParseInt(r.PostForm.Get("job"), 10, 64)
	if err != nil || id <= 0 {
		return "", badRequest("job %q: want a job id", r.PostForm.Get("job"))
	}
	state, err := jobs.Cancel(r.Context(), s.cfg.Base.Pool, id)
	if err != nil {
		return "", jobErr(err)
	}
	if state == "cancelled" {
		return fmt.Sprintf("job %d cancelled", id), nil
	}
	return fmt.Sprintf("job %d: cancel asked for; it stops at its next heartbeat", id), nil
}
