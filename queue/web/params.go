package web

// Reading a page's query parameters, and writing links back with them.

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/reports"
)

// scopeParams reads the required corpus and service of a request and looks them up.
func (s *Server) scopeParams(r *http.Request) (corpus, service string, scope queue.Scope, err error) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	corpus, service = q.Get("corpus"), q.Get("service")
	if corpus == "" || service == "" {
		return "", "", scope, badRequest("corpus and service are required")
	}
	scope, err = s.catalog.LookupScope(r.Context(), corpus, service)
	if errors.Is(err, queue.ErrNotFound) {
		return "", "", scope, httpError{code: http.StatusNotFound, msg: err.Error()}
	}
	return corpus, service, scope, err
}

// intParam reads an optional integer parameter within [min, max].
func intParam(q url.Values, name string, def, min, max int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, badRequest("%s %q: want a whole number from %d to %d", name, v, min, max)
	}
	return n, nil
}

// pageParams reads limit (default 100) and offset within the report's caps.
func pageParams(q url.Values) (limit, offset int, err error) {
	if limit, err = intParam(q, "limit", 100, 1, reports.ReportMaxLimit); err != nil {
		return 0, 0, err
	}
	offset, err = intParam(q, "offset", 0, 0, reports.ReportMaxOffset)
	return limit, offset, err
}

// link is a path with a query, its empty values left out.
func link(path string, pairs ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			v.Set(pairs[i], pairs[i+1])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// statusParam reads a status number of the diff matrix.
func statusParam(v string) (queue.Status, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badRequest("status %q: want a status number", v)
	}
	for _, st := range diffStatuses {
		if int(st) == n {
			return st, nil
		}
	}
	return 0, badRequest("status %d: not a status", n)
}
