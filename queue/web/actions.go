package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
)

// sliceOf reads an action's corpus, service and slice (severity, category, what) into the
// scope that selects its tasks, as cortexq rerun and sandbox create read their flags.
func (s *Server) sliceOf(r *http.Request) (string, string, lease.RerunScope, error) {
	corpus, service, ids, err := s.scopeParams(r)
	if err != nil {
		return "", "", lease.RerunScope{}, err
	}
	f := r.PostForm
	var scope lease.RerunScope
	if all := f.Get("all") == "1"; all && f.Get("severity") != "" {
		// The all-tasks view's slice: tasks of any status with such a message.
		if !reports.IsAllSeverity(f.Get("severity")) {
			return "", "", scope, badRequest("severity %q: with all, want one of info, warning, error, fatal, invalid", f.Get("severity"))
		}
		scope = lease.RerunScope{Severity: f.Get("severity"), Category: f.Get("category"), What: f.Get("what")}
	} else if scope, err = lease.SelectSlice(f.Get("severity"), f.Get("category"), f.Get("what")); err != nil {
		return "", "", scope, badRequest("%v", err)
	}
	scope.CorpusID, scope.ServiceID = ids.CorpusID, ids.ServiceID
	scope.Note = "web: rerun " + sliceText(f.Get("severity"), f.Get("category"), f.Get("what"))
	return corpus, service, scope, nil
}

func sliceText(severity, category, what string) string {
	parts := []string{}
	for _, p := range []string{severity, category, what} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, "/")
}

func (s *Server) rerun(r *http.Request) (string, error) {
	corpus, service, scope, err := s.sliceOf(r)
	if err != nil {
		return "", err
	}
	f := r.PostForm
	if f.Get("severity") == "" && f.Get("category") == "" && f.Get("what") == "" && f.Get("confirm") != "all" {
		return "", badRequest("rerunning every task of corpus %s, service %s needs the box \"every task\" ticked", corpus, service)
	}
	if f.Get("preview") == "1" {
		// The confirmation step: the count, and the same form without preview to do it.
		pre, err := s.store.PreviewRerun(r.Context(), scope)
		if err != nil {
			return "", err
		}
		noteOf(r).DryRun = true
		noteOf(r).matched(pre.Tasks)
		fields := url.Values{}
		for k, v := range f {
			if k != "preview" && k != "csrf" {
				fields[k] = v
			}
		}
		return "", askFirst{Msg: fmt.Sprintf("corpus %s, service %s, slice %s: %s would go back to TODO in a new run; nothing changed yet",
			corpus, service, sliceText(f.Get("severity"), f.Get("category"), f.Get("what")), plural(int(pre.Tasks), "task", "tasks")),
			Action: "/rerun", Button: "Rerun " + plural(int(pre.Tasks), "task", "tasks"), Fields: fields, Back: f.Get("back")}
	}
	sum, err := s.store.Rerun(r.Context(), scope)
	if err != nil {
		return "", err
	}
	noteOf(r).matched(int64(sum.Tasks))
	return fmt.Sprintf("corpus %s, service %s, slice %s: %s back to TODO in a new run; %s of old runs settled; %s dropped",
		corpus, service, sliceText(r.PostForm.Get("severity"), r.PostForm.Get("category"), r.PostForm.Get("what")),
		plural(sum.Tasks, "task", "tasks"), plural(sum.Settled, "lease", "leases"), plural(sum.Unreserved, "reservation", "reservations")), nil
}

func (s *Server) pause(r *http.Request) (string, error) {
	corpus, service, scope, err := s.scopeParams(r)
	if err != nil {
		return "", err
	}
	sum, err := s.store.Pause(r.Context(), scope)
	if err != nil {
		return "", err
	}
	noteOf(r).matched(int64(sum.Blocked))
	return fmt.Sprintf("corpus %s, service %s: paused, %s blocked; %s taken back",
		corpus, service, plural(sum.Blocked, "TODO task", "TODO tasks"), plural(sum.Unreserved+sum.Requeued, "reservation", "reservations")), nil
}

func (s *Server) resume(r *http.Request) (string, error) {
	corpus, service, scope, err := s.scopeParams(r)
	if err != nil {
		return "", err
	}
	n, err := s.store.Resume(r.Context(), scope)
	if err != nil {
		return "", err
	}
	noteOf(r).matched(int64(n))
	return fmt.Sprintf("corpus %s, service %s: resumed, %s back to TODO", corpus, service, plural(n, "task", "tasks")), nil
}

func (s *Server) sandbox(r *http.Request) (string, error) {
	corpus, service, scope, err := s.sliceOf(r)
	if err != nil {
		return "", err
	}
	name := r.PostForm.Get("name")
	if err := catalog.CheckCorpusName(name); err != nil {
		return "", badRequest("sandbox name: %v", err)
	}
	scope.Note = "sandbox of " + corpus
	sum, err := s.reports.CreateSandbox(r.Context(), name, scope, catalog.SandboxPriority)
	switch {
	case errors.Is(err, queue.ErrDuplicate):
		return "", badRequest("sandbox name %q: a corpus of that name exists", name)
	case errors.Is(err, queue.ErrNotFound):
		return "", badRequest("the slice holds no task: no sandbox made")
	case err != nil:
		return "", err
	}
	noteOf(r).matched(int64(sum.Tasks))
	return fmt.Sprintf("sandbox %s (id %d) of corpus %s, service %s: %s, TODO, priority %d", name, sum.ID, corpus, service, plural(sum.Tasks, "task", "tasks"), catalog.SandboxPriority), nil
}

// rerunTask reruns one task (its corpus and service get a new run, as any rerun).
func (s *Server) rerunTask(r *http.Request) (string, error) {
	id, err := strconv.ParseInt(r.PostForm.Get("task"), 10, 64)
	if err != nil || id <= 0 {
		return "", badRequest("task %q: want a positive number", r.PostForm.Get("task"))
	}
	h, err := s.inspect.TaskHistoryMessages(r.Context(), id, -1)
	if err != nil {
		return "", err
	}
	sum, err := s.store.Rerun(r.Context(), lease.RerunScope{CorpusID: h.CorpusID, ServiceID: h.ServiceID,
		TaskIDs: []int64{id}, Note: "web: rerun task " + strconv.FormatInt(id, 10)})
	if err != nil {
		return "", err
	}
	s.deadLetters.forget() // the task may have been one
	noteOf(r).matched(int64(sum.Tasks))
	return fmt.Sprintf("task %d: %s back to TODO in a new run of corpus %s, service %s", id, plural(sum.Tasks, "task", "tasks"), h.Corpus, h.Service), nil
}

// askFirst is an action's answer that asks for a confirmation first: a message (what it would
// do) and a form that does it.
type askFirst struct {
	Msg, Action, Button, Back string
	Fields                    url.Values
}

func (a askFirst) Error() string { return a.Msg }
