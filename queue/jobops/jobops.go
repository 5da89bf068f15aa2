// Package jobops defines the operations cortexq runs as background jobs (queue/jobs): import,
// export, verify, prune, rerun and the corpus lifecycle's steps (activate, extend, deactivate,
// the deletions). Wrapping one more is a jobs.Define of a function that takes
// its arguments and a *jobs.Progress, added to Registry.
package jobops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/export"
	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/lease"
)

// Kinds of the jobs.
const (
	KindImport = "import"
	KindExport = "export"
	KindVerify = "verify"
	KindPrune  = "prune"
	KindRerun  = "rerun"
)

// Registry holds every operation; version is cortexq's, written in export manifests.
func Registry(version string) *jobs.Registry {
	ops := []jobs.Op{
		jobs.Define(KindImport, ImportArgs.check, runImport),
		jobs.Define(KindExport, checkExport, func(ctx context.Context, env jobs.Env, a export.Request, p *jobs.Progress) (any, error) {
			a.Version, a.Progress = version, p.Set
			return export.Run(ctx, env.Base.Pool, a)
		}),
		jobs.Define(KindVerify, VerifyArgs.check, runVerify),
		jobs.Define(KindPrune, PruneArgs.check, runPrune),
		jobs.Define(KindRerun, RerunArgs.check, runRerun),
	}
	return jobs.NewRegistry(append(ops, lifecycleOps()...)...)
}

func checkExport(a export.Request) error {
	if err := a.Check(); err != nil {
		return err
	}
	if !filepath.IsAbs(a.Out) {
		return fmt.Errorf("out %q: want an absolute path (the job runs in another process)", a.Out)
	}
	return nil
}

// scopeOf looks up a corpus and a service by name.
func scopeOf(ctx context.Context, env jobs.Env, corpus, service string) (queue.Scope, error) {
	return env.Base.Catalog.LookupScope(ctx, corpus, service)
}

// parseTime reads a date (YYYY-MM-DD) or an RFC 3339 time.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}

var errBothOrNeither = errors.New("give both corpus and service, or neither")

// PruneArgs are a prune job's: lease.PruneOptions by names.
type PruneArgs struct {
	Corpus  string `json:"corpus,omitempty"`
	Service string `json:"service,omitempty"`
	Keep    int    `json:"keep,omitempty"`
	// Before is a date (YYYY-MM-DD) or RFC 3339 time.
	Before string `json:"before,omitempty"`
}

func (a PruneArgs) check() error {
	if a.Keep == 0 && a.Before == "" {
		return lease.ErrPruneSelection
	}
	return nil
}

func runPrune(ctx context.Context, env jobs.Env, a PruneArgs, p *jobs.Progress) (any, error) {
	opt := lease.PruneOptions{Keep: a.Keep}
	if a.Before != "" {
		t, err := parseTime(a.Before)
		if err != nil {
			return nil, err
		}
		opt.Before = t
	}
	if a.Corpus != "" || a.Service != "" {
		if a.Corpus == "" || a.Service == "" {
			return nil, errBothOrNeither
		}
		sc, err := scopeOf(ctx, env, a.Corpus, a.Service)
		if err != nil {
			return nil, err
		}
		opt.CorpusID, opt.ServiceID = sc.CorpusID, sc.ServiceID
	}
	scopes, err := env.Base.Lease(lease.Config{}).PruneRuns(ctx, opt)
	p.Set(int64(len(scopes)), int64(len(scopes)))
	return map[string]any{"scopes": scopes}, err
}

// RerunArgs are a rerun job's: the tasks of these severities (none: all finished) back to TODO.
type RerunArgs struct {
	Corpus     string   `json:"corpus"`
	Service    string   `json:"service"`
	Severities []string `json:"severities,omitempty"`
	Note       string   `json:"note,omitempty"`
}

func (a RerunArgs) check() error {
	if a.Corpus == "" || a.Service == "" {
		return errors.New("want a corpus and a service")
	}
	for _, s := range a.Severities {
		if _, _, ok := queue.ReportSeverity(s); !ok {
			return fmt.Errorf("unknown severity %q (want %s)", s, queue.ReportSeverityNames())
		}
	}
	return nil
}

func runRerun(ctx context.Context, env jobs.Env, a RerunArgs, p *jobs.Progress) (any, error) {
	sc, err := scopeOf(ctx, env, a.Corpus, a.Service)
	if err != nil {
		return nil, err
	}
	scope := lease.RerunScope{CorpusID: sc.CorpusID, ServiceID: sc.ServiceID, Note: a.Note}
	for _, s := range a.Severities {
		st, _, _ := queue.ReportSeverity(s)
		scope.Statuses = append(scope.Statuses, st)
	}
	sum, err := env.Base.Lease(lease.Config{}).Rerun(ctx, scope)
	p.Set(int64(sum.Tasks), int64(sum.Tasks))
	return sum, err
}
