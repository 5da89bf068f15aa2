package web

// The corpus lifecycle on the dashboard (docs/web.md#corpus-lifecycle): the /lifecycle page's
// forms add services and corpora, activate, extend, deactivate and delete. A deletion (and an
// activation) first shows what it would do, counts per table, on a confirmation step; only its
// confirmed form acts. Each step appends an audit row (surface web).

import (
	"fmt"
	"net/http"

	"github.com/cortexq/cortexq/queue/catalog"
)

func (s *Server) lifecyclePage(r *http.Request) (view, error) {
	services, err := s.catalog.Services(r.Context())
	return view{Page: "lifecycle", Title: "Corpora and services", Data: struct{ Services []catalog.Service }{services}}, err
}

// confirmStep is the confirmation step of a lifecycle form: what it would do, and the form that
// does it.
type confirmStep struct {
	Op, Corpus, Service, Files string
	What                       string
	Tables                     []tableCount
}

type tableCount struct {
	Table string
	Rows  int64
}

// lifecycleForm answers a lifecycle form: the confirmation step of a deletion or activation not
// confirmed yet, else the step done.
func (s *Server) lifecycleForm(w http.ResponseWriter, r *http.Request) {
	p, ok := s.formAllowed(w, r, roleOperator)
	if !ok {
		return
	}
	f := r.PostForm
	op, corpus, service := f.Get("op"), f.Get("corpus"), f.Get("service")
	if err := p.may(lifecycleRole(op)); err != nil {
		s.fail(w, r, err)
		return
	}
	n := noteOf(r)
	n.Action, n.Target = op, "corpus "+corpus+", service "+service
	if step, err := s.lifecyclePreview(r, op, corpus, service); err != nil || step != nil {
		if err != nil {
			s.fail(w, r, lifecycleErr(err))
			return
		}
		n.DryRun = true
		step.Files = f.Get("files")
		s.render(w, r, http.StatusOK, view{Page: "lifecycle_confirm", Title: "Confirm", Data: step})
		return
	}
	msg, err := s.lifecycleAct(r, p, op, corpus, service)
	if err != nil {
		s.fail(w, r, lifecycleErr(err))
		return
	}
	s.logger.Info("web action", "path", r.URL.Path, "op", op, "result", msg)
	s.render(w, r, http.StatusOK, view{Page: "done", Title: "Done", Data: struct{ Msg, Back string }{msg, "/lifecycle"}})
}

// lifecycleRole is the least role a lifecycle step needs: an admin's for what deletes.
func lifecycleRole(op string) string {
	switch op {
	case "deactivate", "corpus delete", "service delete":
		return roleAdmin
	}
	return roleOperator
}

// previewed are the lifecycle forms with a confirmation step.
var previewed = map[string]bool{"activate": true, "deactivate": true, "corpus delete": true, "service delete": true}

// lifecyclePreview is the confirmation step of op, nil when op has none or is confirmed.
func (s *Server) lifecyclePreview(r *http.Request, op, corpus, service string) (*confirmStep, error) {
	if !previewed[op] || r.PostForm.Get("confirm") == "1" {
		return nil, nil
	}
	ctx := r.Context()
	step := &confirmStep{Op: op, Corpus: corpus, Service: service}
	var rm catalog.Removal
	var err error
	switch op {
	case "activate":
		a, err := s.catalog.PreviewActivate(ctx, corpus, service)
		if err != nil {
			return nil, err
		}
		step.What = fmt.Sprintf("activate service %s on corpus %s: up to %s tasks would be added (one per known entry)", service, corpus, commas(a.Entries))
		return step, nil
	case "deactivate":
		rm, err = s.catalog.PreviewDeactivate(ctx, corpus, service)
		step.What = fmt.Sprintf("deactivate service %s on corpus %s", service, corpus)
	case "corpus delete":
		rm, err = s.catalog.PreviewDeleteCorpus(ctx, corpus)
		step.What = "delete corpus " + corpus
	case "service delete":
		rm, err = s.catalog.PreviewDeleteService(ctx, service)
		step.What = "delete service " + service
	}
	if err != nil {
		return nil, err
	}
	step.What += fmt.Sprintf(": %s rows would be removed; %d runs kept with their tallies", commas(rm.Rows()), rm.RunsDetached)
	for _, t := range rm.TableNames() {
		step.Tables = append(step.Tables, tableCount{t, rm.Tables[t]})
	}
	return step, nil
}

// lifecycleAct carries op out and says what it did (corpus add: enqueues its import job).
func (s *Server) lifecycleAct(r *http.Request, p principal, op, corpus, service string) (string, error) {
	ctx, f := r.Context(), r.PostForm
	opts := catalog.DeleteOptions{Files: f.Get("files") == "1"}
	removed := func(target string, rm catalog.Removal, err error) (string, error) {
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: %s rows removed (%s tasks); %d runs closed, %d kept by name; %d result archives removed",
			target, commas(rm.Rows()), commas(rm.Tables["tasks"]), rm.RunsClosed, rm.RunsDetached, rm.Files), nil
	}
	switch op {
	case "service add":
		if !serviceName.MatchString(service) {
			return "", badRequest("service name %q: want up to 200 letters, digits and _.+-, starting with a letter or digit", service)
		}
		svc, err := s.catalog.AddService(ctx, service, 0)
		return fmt.Sprintf("added service %s (id %d)", svc.Name, svc.ID), err
	case "corpus add":
		id, err := s.enqueueCorpusAdd(r, p, corpus, f.Get("path"), service)
		if err != nil {
			return "", err
		}
		noteOf(r).Target += fmt.Sprintf(" (job %d)", id)
		return fmt.Sprintf("corpus %s, service %s: import job %d enqueued; its progress is on /jobs", corpus, service, id), nil
	case "activate":
		a, err := s.catalog.Activate(ctx, corpus, service, 0, nil)
		return fmt.Sprintf("corpus %s, service %s: %s tasks added", corpus, service, commas(a.Added)), err
	case "extend":
		e, err := s.catalog.Extend(ctx, corpus, 0, nil)
		return fmt.Sprintf("corpus %s: %s source archives found, %s tasks added", corpus, commas(e.Entries), commas(e.Added)), err
	case "deactivate":
		rm, err := s.catalog.Deactivate(ctx, corpus, service, opts)
		return removed("corpus "+corpus+", service "+service, rm, err)
	case "corpus delete":
		rm, err := s.catalog.DeleteCorpus(ctx, corpus, opts)
		return removed("corpus "+corpus, rm, err)
	case "service delete":
		rm, err := s.catalog.DeleteService(ctx, service, opts)
		return removed("service "+service, rm, err)
	}
	return "", badRequest("op %q: want service add, corpus add, activate, extend, deactivate, corpus delete or service delete", op)
}
