package web

// The HTTP API (/api/v1, docs/api.md): a JSON twin of every page and action, described by the
// OpenAPI document of queue/api. Its reads go through the same calls as the pages, in the same
// slots and within the same deadline; its answers are the types of queue/api, which the CLI's
// --json prints too.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
)

// apiPrefix is the API's path; a request under it gets JSON, errors included.
const apiPrefix = "/api/"

// apiFunc answers an API request with one of queue/api's types.
type apiFunc func(*http.Request) (any, error)

// apiRoute is one route of the API: a test checks that they and the spec's paths are the same.
type apiRoute struct {
	method, path string
	h            http.HandlerFunc
}

// scopePath is the path of a corpus and service's resources.
const scopePath = "/api/v1/corpora/{corpus}/services/{service}"

func (s *Server) apiRouteTable() []apiRoute {
	read := func(fn apiFunc) http.HandlerFunc { return s.inSlots(s.heavy, s.answer(fn)) }
	logs := func(fn apiFunc) http.HandlerFunc { return s.inSlots(s.logs, s.answer(fn)) }
	act := func(fn func(*http.Request, principal) (any, error)) http.HandlerFunc { return s.apiAction(fn) }
	return []apiRoute{
		{"GET", "/api/v1", s.answer(s.apiIndex)},
		{"GET", "/api/v1/openapi.json", s.apiSpec},
		{"GET", "/api/v1/docs", s.light(s.apiDocs)},
		{"GET", "/api/v1/status", read(s.apiStatus)},
		{"GET", "/api/v1/corpora", read(s.apiCorpora)},
		{"GET", "/api/v1/services", read(s.apiServices)},
		{"GET", "/api/v1/sandboxes", read(s.apiSandboxes)},
		{"DELETE", "/api/v1/sandboxes/{name}", act(s.apiSandboxDelete)},
		{"GET", scopePath + "/status", read(s.apiScopeStatus)},
		{"GET", scopePath + "/report", read(s.apiReportSeverities)},
		{"GET", scopePath + "/report/categories", read(s.apiReportNames)},
		{"GET", scopePath + "/report/whats", read(s.apiReportNames)},
		{"GET", scopePath + "/report/tasks", logs(s.apiReportTasks)},
		{"GET", scopePath + "/runs", read(s.apiRuns)},
		{"GET", scopePath + "/stages", read(s.apiStages)},
		{"GET", "/api/v1/services/{service}/stages", read(s.apiStages)},
		{"GET", scopePath + "/diff", read(s.apiDiff)},
		{"GET", scopePath + "/diff/tasks", read(s.apiDiffTasks)},
		{"GET", scopePath + "/why", read(s.apiWhy)},
		{"POST", scopePath + "/rerun", act(s.apiRerun)},
		{"POST", scopePath + "/pause", act(s.apiPause)},
		{"POST", scopePath + "/resume", act(s.apiResume)},
		{"POST", scopePath + "/sandboxes", act(s.apiSandboxMake)},
		{"GET", "/api/v1/tasks/{id}", read(s.apiTask)},
		{"GET", "/api/v1/tasks/{id}/messages", logs(s.apiTaskMessages)},
		{"POST", "/api/v1/tasks/{id}/rerun", act(s.apiTaskRerun)},
		{"GET", "/api/v1/workers", read(s.apiWorkers)},
		{"GET", "/api/v1/workers/attempts", read(s.apiWorkerAttempts)},
		{"GET", "/api/v1/leases", read(s.apiLeases)},
		{"GET", "/api/v1/dead-letters", read(s.apiDeadLetters)},
		{"GET", "/api/v1/retries", read(s.apiRetries)},
		{"GET", "/api/v1/replicas", read(s.apiReplicas)},
		{"GET", "/api/v1/search", read(s.apiSearch)},
		{"POST", "/api/v1/services", act(s.apiServiceAdd)},
		{"DELETE", "/api/v1/services/{service}", act(s.apiServiceDelete)},
		{"POST", "/api/v1/corpora", act(s.apiCorpusAdd)},
		{"DELETE", "/api/v1/corpora/{corpus}", act(s.apiCorpusDelete)},
		{"POST", "/api/v1/corpora/{corpus}/extend", act(s.apiExtend)},
		{"POST", scopePath + "/activate", act(s.apiActivate)},
		{"POST", scopePath + "/deactivate", act(s.apiDeactivate)},
	}
}

// apiRoutes registers the API's routes, and a JSON 404 or 405 for any other path under it.
func (s *Server) apiRoutes() {
	routes := s.apiRouteTable()
	for _, rt := range routes {
		s.mux.HandleFunc(rt.method+" "+rt.path, rt.h)
	}
	s.mux.HandleFunc(apiPrefix, func(w http.ResponseWriter, r *http.Request) {
		for _, rt := range routes {
			probe := r.Clone(r.Context())
			probe.Method = rt.method
			if _, pattern := s.mux.Handler(probe); pattern == rt.method+" "+rt.path {
				s.apiFail(w, r, httpError{code: http.StatusMethodNotAllowed, msg: r.Method + " " + r.URL.Path + ": not allowed here (GET /api/v1 lists the endpoints)"})
				return
			}
		}
		s.apiFail(w, r, httpError{code: http.StatusNotFound, msg: "no such endpoint: " + r.URL.Path + " (GET /api/v1 lists them)"})
	})
}

// answer writes fn's answer as JSON, or its error.
func (s *Server) answer(fn apiFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// writeJSON writes v as JSON (not HTML-escaped: it is served as application/json, never as a
// page). The answers are bounded by their limits and the clipping of their texts.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		code, buf = http.StatusInternalServerError, bytes.Buffer{}
		buf.WriteString(`{"code":"internal","message":"the answer could not be written as JSON"}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// apiCodes names each status's error code.
var apiCodes = map[int]string{
	http.StatusBadRequest: "bad_request", http.StatusUnauthorized: "unauthorized", http.StatusForbidden: "forbidden",
	http.StatusNotFound: "not_found", http.StatusMethodNotAllowed: "method_not_allowed",
	http.StatusRequestEntityTooLarge: "too_large", http.StatusUnprocessableEntity: "invalid_parameter",
	http.StatusTooManyRequests: "too_many", http.StatusServiceUnavailable: "busy", http.StatusInternalServerError: "internal",
}

// apiError is an API error with a code of its own (read_only).
type apiError struct {
	status int
	code   string
	msg    string
}

func (e apiError) Error() string { return e.msg }

// readOnlyDB is the error of an action the database refused as read-only: a hot standby, or
// --read-only's sessions.
var readOnlyDB = apiError{http.StatusForbidden, "read_only",
	"the database is read-only (a hot standby, or a read-only role): send actions to a dashboard on the primary"}

// apiFail answers err as JSON {code, message}: a bad parameter (400 of the pages' checks, a
// api.ParamError) is 422, a request that is not text 400, queue.ErrNotFound 404; anything else
// is a 500 logged.
func (s *Server) apiFail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := http.StatusInternalServerError, "internal error: see the dashboard's log"
	var he httpError
	var ae apiError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ae):
		writeJSON(w, ae.status, api.Error{Code: ae.code, Message: ae.msg})
		return
	case errors.As(err, &he):
		code, msg = he.code, he.msg
		if code == http.StatusBadRequest && !he.notText {
			code = http.StatusUnprocessableEntity
		}
	case api.IsParam(err):
		code, msg = http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, queue.ErrNotFound):
		code, msg = http.StatusNotFound, err.Error()
	case errors.As(err, &pe) && pe.Code == "25006":
		writeJSON(w, readOnlyDB.status, api.Error{Code: readOnlyDB.code, Message: readOnlyDB.msg})
		return
	case errors.Is(err, context.Canceled):
		return
	default:
		s.logger.Error("api request", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	writeJSON(w, code, api.Error{Code: apiCodes[code], Message: msg})
}

func (s *Server) apiIndex(*http.Request) (any, error) {
	ends, err := api.Endpoints()
	if err != nil {
		return nil, err
	}
	return api.Index{Version: api.Version(), Spec: "/api/v1/openapi.json", Docs: "/api/v1/docs", Endpoints: ends}, nil
}

func (s *Server) apiSpec(w http.ResponseWriter, r *http.Request) {
	b, err := api.Spec()
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}
