package web

// Rendering a page, and the errors a handler returns.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue"
)

// httpError is an error with its HTTP status: bad input (400), not found (404), refused (403).
type httpError struct {
	code int
	msg  string
	// notText: the request is not text (text.CheckInput), which the API answers 400 where it
	// answers a bad parameter 422.
	notText bool
}

func (e httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return httpError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// notText is the 400 of a request that is not text.
func notText(format string, args ...any) error {
	return httpError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...), notText: true}
}

func forbidden(format string, args ...any) error {
	return httpError{code: http.StatusForbidden, msg: fmt.Sprintf(format, args...)}
}

// view is what a page handler returns: the template to render and its data.
type view struct {
	Page  string
	Title string
	Data  any
}

// pageData is what every page's template gets.
type pageData struct {
	Title    string
	Nav      string
	Admin    bool   // the browser holds a session: show the buttons
	Owner    string // the session's owner and role
	Role     string
	CanAdmin bool   // a token is set and actions are allowed: show the sign-in link
	CSRF     string // the hidden field of every form
	Passkeys bool   // passkeys are on: link the passkeys page
	Data     any
}

// page wraps a handler that renders a page, one of at most HeavyLimit at once.
func (s *Server) page(fn func(*http.Request) (view, error)) http.HandlerFunc {
	return s.heavyOnly(s.light(fn))
}

// logPage wraps a handler that renders a log page, one of at most LogLimit at once, made once
// for the identical requests that arrive while it is made (shared).
func (s *Server) logPage(fn func(*http.Request) (view, error)) http.HandlerFunc {
	return s.shared(s.inSlots(s.logs, s.light(fn)))
}

// reportPage wraps the report page: its messages level is a log page, its other levels pages.
func (s *Server) reportPage(fn func(*http.Request) (view, error)) http.HandlerFunc {
	logs, other := s.logPage(fn), s.page(fn)
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("what") != "" {
			logs(w, r)
			return
		}
		other(w, r)
	}
}

// heavyOnly runs h in one of the HeavyLimit slots.
func (s *Server) heavyOnly(h http.HandlerFunc) http.HandlerFunc { return s.inSlots(s.heavy, h) }

// inSlots runs h once one of slots is free: it waits up to HeavyWait, then answers 503 with
// Retry-After. Memory then grows with the slots, not with the clients. Once in, the page has
// PageDeadline to work (pageDeadline).
func (s *Server) inSlots(slots chan struct{}, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(s.cfg.HeavyWait)
		defer t.Stop()
		select {
		case slots <- struct{}{}:
		case <-t.C:
			w.Header().Set("Retry-After", "2")
			s.fail(w, r, httpError{code: http.StatusServiceUnavailable, msg: "the dashboard is busy making other pages: try again in a few seconds"})
			return
		case <-r.Context().Done():
			return
		}
		defer func() { <-slots }()
		h(w, withDeadline(r, s.cfg.PageDeadline))
	}
}

// light wraps a handler that renders a page, without waiting for a slot.
func (s *Server) light(fn func(*http.Request) (view, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, v)
	}
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, v view) {
	t := s.pages[v.Page]
	if t == nil {
		s.fail(w, r, fmt.Errorf("no template %s", v.Page))
		return
	}
	d := pageData{Title: v.Title, Nav: v.Page, CanAdmin: s.actionsAllowed(), Passkeys: s.passkeysOn(), Data: v.Data}
	if p, sess, ok := s.session(r); ok {
		d.Admin, d.CSRF, d.Owner, d.Role = true, s.csrfToken(sess), p.Owner, p.Role
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// Streamed as it is made, through a small buffer: a page costs the memory of its data, not
	// of its HTML, and never sends more than maxPageBytes.
	cw := &capWriter{w: w, code: code, left: maxPageBytes}
	bw := bufio.NewWriterSize(cw, 32<<10)
	err := t.ExecuteTemplate(bw, "layout.html", d)
	if err == nil {
		err = bw.Flush()
	}
	switch {
	case err == nil:
	case cw.full:
		s.logger.Warn("render: page cut", "page", v.Page, "path", r.URL.Path, "bytes", maxPageBytes)
	case cw.err != nil: // the client went away
	default:
		s.logger.Error("render", "page", v.Page, "error", err)
		if !cw.started {
			http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		}
	}
}

// errPageFull stops a page at maxPageBytes.
var errPageFull = errors.New("page cut at its size limit")

// capWriter writes at most left bytes to w, after the status code on the first write.
type capWriter struct {
	w       http.ResponseWriter
	code    int
	started bool
	left    int
	full    bool
	err     error // w's error
}

func (c *capWriter) Write(p []byte) (int, error) {
	if !c.started {
		c.started = true
		c.w.WriteHeader(c.code)
	}
	if len(p) > c.left {
		n, err := c.w.Write(p[:c.left])
		c.left -= n
		c.full = true
		if err != nil {
			c.err = err
			return n, err
		}
		return n, errPageFull
	}
	n, err := c.w.Write(p)
	c.left -= n
	c.err = err
	return n, err
}

// fail answers err: its status and message for an httpError, 404 for queue.ErrNotFound, else 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if strings.HasPrefix(r.URL.Path, apiPrefix) {
		s.apiFail(w, r, err)
		return
	}
	code, msg := http.StatusInternalServerError, "internal error: see the dashboard's log"
	var he httpError
	switch {
	case errors.As(err, &he):
		code, msg = he.code, he.msg
	case errors.Is(err, queue.ErrNotFound):
		code, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, context.Canceled):
		return
	default:
		s.logger.Error("request", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	noteOf(r).Err = msg
	s.render(w, r, code, view{Page: "error", Title: http.StatusText(code), Data: struct {
		Code int
		Msg  string
	}{code, msg}})
}
