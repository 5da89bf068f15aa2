package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/text"
)

// readSlice reads an action's JSON body, a slice (empty body: every task).
func readSlice(r *http.Request) (api.Slice, error) {
	var sl api.Slice
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return sl, err
	}
	if len(b) == 0 {
		return sl, nil
	}
	if !utf8.Valid(b) {
		return sl, notText("the body is not UTF-8 text")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sl); err != nil {
		return sl, notText("the body: want a JSON object {severity, category, what, all, every, name}: %v", err)
	}
	for name, v := range map[string]string{"severity": sl.Severity, "category": sl.Category, "what": sl.What, "name": sl.Name} {
		if err := text.CheckInput(name, v); err != nil {
			return sl, notText("%v", err)
		}
	}
	return sl, nil
}

// rerunScope is the scope a slice selects, as the dashboard's forms and cortexq rerun read it.
func rerunScope(ids queue.Scope, sl api.Slice) (lease.RerunScope, error) {
	var scope lease.RerunScope
	var err error
	if sl.All && sl.Severity != "" {
		if !reports.IsAllSeverity(sl.Severity) {
			return scope, api.Paramf("severity %q: with all, want one of info, warning, error, fatal, invalid", sl.Severity)
		}
		scope = lease.RerunScope{Severity: sl.Severity, Category: sl.Category, What: sl.What}
	} else if scope, err = lease.SelectSlice(sl.Severity, sl.Category, sl.What); err != nil {
		return scope, api.Paramf("%v", err)
	}
	scope.CorpusID, scope.ServiceID = ids.CorpusID, ids.ServiceID
	return scope, nil
}

// runPair is the last run of a scope and the one before it.
func (s *Server) runPair(r *http.Request, ids queue.Scope) (last, previous int64, err error) {
	runs, err := s.reports.Runs(r.Context(), ids)
	if n := len(runs); err == nil && n > 0 {
		last = runs[n-1].ID
		if n > 1 {
			previous = runs[n-2].ID
		}
	}
	return last, previous, err
}

func (s *Server) apiRerun(r *http.Request, _ principal) (any, error) {
	corpus, service, ids, err := s.apiScope(r)
	if err != nil {
		return nil, err
	}
	sl, err := readSlice(r)
	if err != nil {
		return nil, err
	}
	if sl.Severity == "" && sl.Category == "" && sl.What == "" && !sl.Every {
		return nil, api.Paramf("rerunning every task of corpus %s, service %s needs \"every\": true", corpus, service)
	}
	scope, err := rerunScope(ids, sl)
	if err != nil {
		return nil, err
	}
	what := sliceText(sl.Severity, sl.Category, sl.What)
	n := noteOf(r)
	n.Params["slice"], n.Params["all"], n.Params["every"] = what, sl.All, sl.Every
	switch dry := r.URL.Query().Get("dry_run"); dry {
	case "true", "1":
		pre, err := s.store.PreviewRerun(r.Context(), scope)
		if err != nil {
			return nil, err
		}
		n.DryRun, n.Params["dry_run"] = true, true
		n.matched(pre.Tasks)
		out := api.Rerun{Corpus: corpus, Service: service, Slice: what, Tasks: int(pre.Tasks), DryRun: true}
		out.Run, out.Previous, err = s.runPair(r, ids)
		return out, err
	case "", "false", "0":
	default:
		return nil, api.Paramf("dry_run %q: want true or false", dry)
	}
	scope.Note = "api: rerun " + what
	sum, err := s.store.Rerun(r.Context(), scope)
	if err != nil {
		return nil, err
	}
	n.matched(int64(sum.Tasks))
	out := api.Rerun{Corpus: corpus, Service: service, Slice: what, Tasks: sum.Tasks, Settled: sum.Settled, Unreserved: sum.Unreserved}
	out.Run, out.Previous, err = s.runPair(r, ids)
	return out, err
}

func (s *Server) apiPause(r *http.Request, _ principal) (any, error) {
	corpus, service, ids, err := s.apiScope(r)
	if err != nil {
		return nil, err
	}
	sum, err := s.store.Pause(r.Context(), ids)
	if err != nil {
		return nil, err
	}
	noteOf(r).matched(int64(sum.Blocked))
	return api.Paused{Corpus: corpus, Service: service, Blocked: sum.Blocked, Unreserved: sum.Unreserved, Requeued: sum.Requeued}, nil
}

func (s *Server) apiResume(r *http.Request, _ principal) (any, error) {
	corpus, service, ids, err := s.apiScope(r)
	if err != nil {
		return nil, err
	}
	n, err := s.store.Resume(r.Context(), ids)
	if err != nil {
		return nil, err
	}
	noteOf(r).matched(int64(n))
	return api.Resumed{Corpus: corpus, Service: service, Resumed: n}, nil
}

func (s *Server) apiSandboxMake(r *http.Request, _ principal) (any, error) {
	corpus, service, ids, err := s.apiScope(r)
	if err != nil {
		return nil, err
	}
	sl, err := readSlice(r)
	if err != nil {
		return nil, err
	}
	noteOf(r).Params["name"] = sl.Name
	if err := catalog.CheckCorpusName(sl.Name); err != nil {
		return nil, api.Paramf("sandbox name: %v", err)
	}
	scope, err := rerunScope(ids, sl)
	if err != nil {
		return nil, err
	}
	scope.Note = "sandbox of " + corpus
	sum, err := s.reports.CreateSandbox(r.Context(), sl.Name, scope, catalog.SandboxPriority)
	switch {
	case errors.Is(err, queue.ErrDuplicate):
		return nil, api.Paramf("sandbox name %q: a corpus of that name exists", sl.Name)
	case errors.Is(err, queue.ErrNotFound):
		return nil, api.Paramf("the slice holds no task: no sandbox made")
	case err != nil:
		return nil, err
	}
	noteOf(r).matched(int64(sum.Tasks))
	return api.SandboxMade{Name: sl.Name, ID: sum.ID, Parent: corpus, Service: service, Tasks: sum.Tasks, Priority: catalog.SandboxPriority}, nil
}

func (s *Server) apiSandboxDelete(r *http.Request, _ principal) (any, error) {
	name := r.PathValue("name")
	sum, err := s.reports.DeleteSandbox(r.Context(), name)
	if errors.Is(err, queue.ErrNotFound) {
		return nil, httpError{code: http.StatusNotFound, msg: "sandbox " + name + ": no such sandbox"}
	}
	if err != nil {
		return nil, err
	}
	noteOf(r).matched(int64(sum.Tasks))
	return api.SandboxDeleted{Name: name, Tasks: sum.Tasks, Archives: sum.Archives}, nil
}

func (s *Server) apiTaskRerun(r *http.Request, _ principal) (any, error) {
	h, err := s.history(r, -1)
	if err != nil {
		return nil, err
	}
	ids := queue.Scope{CorpusID: h.CorpusID, ServiceID: h.ServiceID}
	sum, err := s.store.Rerun(r.Context(), lease.RerunScope{CorpusID: h.CorpusID, ServiceID: h.ServiceID,
		TaskIDs: []int64{h.ID}, Note: "api: rerun task " + r.PathValue("id")})
	if err != nil {
		return nil, err
	}
	s.deadLetters.forget() // the task may have been one
	noteOf(r).matched(int64(sum.Tasks))
	out := api.Rerun{Corpus: h.Corpus, Service: h.Service, Slice: "task " + r.PathValue("id"), Tasks: sum.Tasks,
		Settled: sum.Settled, Unreserved: sum.Unreserved}
	out.Run, out.Previous, err = s.runPair(r, ids)
	return out, err
}
