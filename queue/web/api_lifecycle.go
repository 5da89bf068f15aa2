package web

// The corpus lifecycle through the API (docs/api.md#corpus-lifecycle): add and delete services
// and corpora, activate, extend and deactivate. Deletions and activate take dry_run=true, which
// answers with the counts and changes nothing. Each call appends an audit row.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/text"
)

// readBody decodes an action's JSON body into v, refusing unknown fields.
func readBody(r *http.Request, v any, fields string) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if !utf8.Valid(b) {
		return notText("the body is not UTF-8 text")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return notText("the body: want a JSON object {%s}: %v", fields, err)
	}
	return nil
}

// dryRun reads the dry_run parameter.
func dryRun(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("dry_run"); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, api.Paramf("dry_run %q: want true or false", v)
	}
}

// audit tells the route's audit row (audited) what the action acted on, how many rows it
// matched, whether it was a preview, and its error.
func (s *Server) audit(r *http.Request, _ principal, _, target string, matched *int64, dry bool, err error) {
	n := noteOf(r)
	n.Target, n.Matched, n.DryRun = target, matched, dry
	if err != nil {
		n.Err = err.Error()
	}
}

// serviceName is the services.name check of the schema.
var serviceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,199}$`)

func (s *Server) apiServiceAdd(r *http.Request, p principal) (v any, err error) {
	var body api.ServiceNew
	defer func() { s.audit(r, p, "service add", "service "+body.Name, nil, false, err) }()
	if err := readBody(r, &body, "name, lease_timeout_seconds"); err != nil {
		return nil, err
	}
	if !serviceName.MatchString(body.Name) {
		return nil, api.Paramf("service name %q: want up to 200 letters, digits and _.+-, starting with a letter or digit", body.Name)
	}
	if body.LeaseTimeoutSeconds < 0 {
		return nil, api.Paramf("lease_timeout_seconds %d: want a positive number, or 0", body.LeaseTimeoutSeconds)
	}
	svc, err := s.catalog.AddService(r.Context(), body.Name, time.Duration(body.LeaseTimeoutSeconds)*time.Second)
	if errors.Is(err, queue.ErrDuplicate) {
		return nil, api.Paramf("service %s already exists", body.Name)
	}
	if err != nil {
		return nil, err
	}
	return api.NewServices([]catalog.Service{svc}).Services[0], nil
}

// apiCorpusAdd enqueues the import of a corpus (jobops.KindImport of its path) and answers at
// once: 202 with the job's handle, whose progress GET /api/v1/jobs/{id} tells. The import works
// a batch a transaction (no long transaction) in a job runner, which must see path.
func (s *Server) apiCorpusAdd(r *http.Request, p principal) (v any, err error) {
	var body api.CorpusNew
	target := ""
	defer func() {
		s.audit(r, p, "corpus add", "corpus "+body.Name+", service "+body.Service+target, nil, false, err)
	}()
	if err := readBody(r, &body, "name, path, service"); err != nil {
		return nil, err
	}
	id, err := s.enqueueCorpusAdd(r, p, body.Name, body.Path, body.Service)
	if err != nil {
		return nil, err
	}
	target = fmt.Sprintf(" (job %d)", id)
	return jobAccepted(id, jobops.KindImport), nil
}

// enqueueCorpusAdd checks a corpus add (name, absolute path, known service) and enqueues its
// import job; a refusal is a 422, and enqueues nothing.
func (s *Server) enqueueCorpusAdd(r *http.Request, p principal, name, path, service string) (int64, error) {
	for field, v := range map[string]string{"path": path, "service": service} {
		if err := text.CheckInput(field, v); err != nil || v == "" {
			return 0, api.Paramf("%s: want a non-empty text", field)
		}
	}
	if err := catalog.CheckCorpusName(name); err != nil {
		return 0, api.Paramf("corpus name: %v", err)
	}
	if !filepath.IsAbs(path) {
		return 0, api.Paramf("path %q: want an absolute path (the import runs as a job, in another process)", path)
	}
	if _, err := s.catalog.Service(r.Context(), service); err != nil {
		if errors.Is(err, queue.ErrNotFound) {
			return 0, api.Paramf("%v", err)
		}
		return 0, err
	}
	args, err := json.Marshal(jobops.ImportArgs{Corpus: name, Service: service, Paths: []string{path}})
	if err != nil {
		return 0, err
	}
	return s.enqueueJob(r, p, jobRequest{Kind: jobops.KindImport, Args: args})
}

func (s *Server) apiActivate(r *http.Request, p principal) (v any, err error) {
	corpus, service := r.PathValue("corpus"), r.PathValue("service")
	dry, err := dryRun(r)
	var matched *int64
	defer func() { s.audit(r, p, "activate", "corpus "+corpus+", service "+service, matched, dry, err) }()
	if err != nil {
		return nil, err
	}
	var a catalog.Activation
	if dry {
		a, err = s.catalog.PreviewActivate(r.Context(), corpus, service)
	} else {
		a, err = s.catalog.Activate(r.Context(), corpus, service, 0, nil)
	}
	if err != nil {
		return nil, lifecycleErr(err)
	}
	matched = &a.Added
	if dry {
		matched = &a.Entries
	}
	return api.Activation{Corpus: corpus, Service: service, DryRun: dry, Entries: a.Entries, Added: a.Added, RunOpened: a.RunOpened}, nil
}

func (s *Server) apiExtend(r *http.Request, p principal) (v any, err error) {
	corpus := r.PathValue("corpus")
	var matched *int64
	defer func() { s.audit(r, p, "extend", "corpus "+corpus, matched, false, err) }()
	ext, err := s.catalog.Extend(r.Context(), corpus, 0, nil)
	if err != nil {
		return nil, lifecycleErr(err)
	}
	matched = &ext.Added
	return api.Extension{Corpus: corpus, Services: ext.Services, Entries: ext.Entries, Added: ext.Added, Skipped: ext.Skipped}, nil
}

func (s *Server) apiDeactivate(r *http.Request, p principal) (any, error) {
	corpus, service := r.PathValue("corpus"), r.PathValue("service")
	return s.removal(r, p, "deactivate", "corpus "+corpus+", service "+service,
		func(ctx context.Context) (catalog.Removal, error) {
			return s.catalog.PreviewDeactivate(ctx, corpus, service)
		},
		func(ctx context.Context, o catalog.DeleteOptions) (catalog.Removal, error) {
			return s.catalog.Deactivate(ctx, corpus, service, o)
		})
}

func (s *Server) apiCorpusDelete(r *http.Request, p principal) (any, error) {
	corpus := r.PathValue("corpus")
	return s.removal(r, p, "corpus delete", "corpus "+corpus,
		func(ctx context.Context) (catalog.Removal, error) { return s.catalog.PreviewDeleteCorpus(ctx, corpus) },
		func(ctx context.Context, o catalog.DeleteOptions) (catalog.Removal, error) {
			return s.catalog.DeleteCorpus(ctx, corpus, o)
		})
}

func (s *Server) apiServiceDelete(r *http.Request, p principal) (any, error) {
	service := r.PathValue("service")
	return s.removal(r, p, "service delete", "service "+service,
		func(ctx context.Context) (catalog.Removal, error) {
			return s.catalog.PreviewDeleteService(ctx, service)
		},
		func(ctx context.Context, o catalog.DeleteOptions) (catalog.Removal, error) {
			return s.catalog.DeleteService(ctx, service, o)
		})
}

// removal answers a deletion: with dry_run=true its preview, else what it removed (files=true
// also removes the deleted tasks' result archives).
func (s *Server) removal(r *http.Request, p principal, action, target string, preview func(context.Context) (catalog.Removal, error),
	act func(context.Context, catalog.DeleteOptions) (catalog.Removal, error)) (v any, err error) {
	dry, err := dryRun(r)
	var matched *int64
	defer func() { s.audit(r, p, action, target, matched, dry, err) }()
	if err != nil {
		return nil, err
	}
	files := r.URL.Query().Get("files")
	if files != "" && files != "true" && files != "false" {
		return nil, api.Paramf("files %q: want true or false", files)
	}
	var rm catalog.Removal
	if dry {
		rm, err = preview(r.Context())
	} else {
		rm, err = act(r.Context(), catalog.DeleteOptions{Files: files == "true"})
	}
	if err != nil {
		return nil, lifecycleErr(err)
	}
	n := rm.Tables["tasks"]
	matched = &n
	return api.Removal{Target: target, DryRun: dry, Rows: rm.Rows(), Tables: rm.Tables, RunsClosed: rm.RunsClosed,
		RunsDetached: rm.RunsDetached, Files: rm.Files}, nil
}

// lifecycleErr makes an unknown corpus or service a 404 and a sandbox a 422.
func lifecycleErr(err error) error {
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return httpError{code: http.StatusNotFound, msg: err.Error()}
	case errors.Is(err, catalog.ErrSandbox):
		return api.Paramf("%v", err)
	}
	return err
}
