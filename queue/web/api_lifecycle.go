package web

// The corpus lifecycle through the API (docs/api.md#corpus-lifecycle): add and delete services
// and corpora, activate, extend and deactivate. Deletions and activate take dry_run=true, which
// answers with the counts and changes nothing. Each call appends an audit row.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/catalog"
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

// audit appends the audit row of an API action: outcome dry_run, ok, refused (a bad request)
// or failed. A row that cannot be written is logged.
func (s *Server) audit(r *http.Request, p principal, action, target string, matched *int64, dry bool, err error) {
	row := catalog.AuditRow{Actor: p.Owner, Surface: "api", Action: action, Target: target, Matched: matched,
		Outcome: "ok", Parameters: json.RawMessage(`{}`)}
	if q := r.URL.RawQuery; q != "" {
		row.Parameters, _ = json.Marshal(map[string]string{"query": q})
	}
	var he httpError
	switch {
	case err != nil && (api.IsParam(err) || errors.As(err, &he) || errors.Is(err, queue.ErrNotFound)):
		row.Outcome, row.Error = "refused", err.Error()
	case err != nil:
		row.Outcome, row.Error = "failed", err.Error()
	case dry:
		row.Outcome = "dry_run"
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	if aerr := s.catalog.Audit(ctx, row); aerr != nil {
		s.logger.Error("api action: audit row", "action", action, "error", aerr)
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

func (s *Server) apiCorpusAdd(r *http.Request, p principal) (v any, err error) {
	var body api.CorpusNew
	var matched *int64
	defer func() {
		s.audit(r, p, "corpus add", "corpus "+body.Name+", service "+body.Service, matched, false, err)
	}()
	if err := readBody(r, &body, "name, path, service"); err != nil {
		return nil, err
	}
	for name, v := range map[string]string{"path": body.Path, "service": body.Service} {
		if err := text.CheckInput(name, v); err != nil || v == "" {
			return nil, api.Paramf("%s: want a non-empty text", name)
		}
	}
	if err := catalog.CheckCorpusName(body.Name); err != nil {
		return nil, api.Paramf("corpus name: %v", err)
	}
	sum, err := s.catalog.AddCorpus(r.Context(), body.Name, body.Path, body.Service, nil)
	if err != nil {
		if errors.Is(err, queue.ErrNotFound) {
			return nil, api.Paramf("%v", err)
		}
		return nil, httpError{code: http.StatusBadRequest, msg: err.Error()}
	}
	n := int64(sum.Added)
	matched = &n
	return api.CorpusAdded{Corpus: body.Name, Service: body.Service, Created: sum.CorpusCreated, Added: sum.Added,
		Existing: sum.Existing, Skipped: sum.Skipped, RunOpened: sum.RunOpened}, nil
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
