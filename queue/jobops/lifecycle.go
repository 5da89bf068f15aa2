package jobops

import (
	"context"
	"errors"
	"strings"

	"github.com/cortexq/cortexq/queue/api"

	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/jobs"
)

// Kinds of the corpus lifecycle's jobs (docs/operations.md#corpus-lifecycle): each works in
// batches, a transaction each, and a job run again after its process died goes on where the
// rows say it stopped (an activation adds only the tasks still missing; a deletion deletes
// what is left).
const (
	KindActivate      = "activate"
	KindExtend        = "extend"
	KindDeactivate    = "deactivate"
	KindDeleteCorpus  = "delete_corpus"
	KindDeleteService = "delete_service"
)

// AdminKinds are the kinds only an admin may enqueue: those that delete.
var AdminKinds = map[string]bool{KindPrune: true, KindDeactivate: true, KindDeleteCorpus: true, KindDeleteService: true}

// LifecycleArgs are a lifecycle job's: the corpus and the service it acts on (extend: the corpus
// only; delete_service: the service only), and for deletions whether to remove the result
// archives too.
type LifecycleArgs struct {
	Corpus  string `json:"corpus,omitempty"`
	Service string `json:"service,omitempty"`
	Files   bool   `json:"files,omitempty"`
}

func needs(corpus, service bool) func(LifecycleArgs) error {
	return func(a LifecycleArgs) error {
		switch {
		case corpus && a.Corpus == "":
			return errors.New("want a corpus")
		case service && a.Service == "":
			return errors.New("want a service")
		}
		return nil
	}
}

// lifecycleOps are the lifecycle's operations as jobs.
func lifecycleOps() []jobs.Op {
	// The results are the API's answers of the same steps (queue/api).
	deletion := func(run func(c *catalog.Catalog, ctx context.Context, a LifecycleArgs, o catalog.DeleteOptions) (catalog.Removal, error)) func(context.Context, jobs.Env, LifecycleArgs, *jobs.Progress) (any, error) {
		return func(ctx context.Context, env jobs.Env, a LifecycleArgs, p *jobs.Progress) (any, error) {
			rm, err := run(env.Base.Catalog, ctx, a, catalog.DeleteOptions{Files: a.Files, Progress: p.Set})
			return api.Removal{Target: strings.TrimSpace(a.Corpus + " " + a.Service), Rows: rm.Rows(), Tables: rm.Tables,
				RunsClosed: rm.RunsClosed, RunsDetached: rm.RunsDetached, Files: rm.Files}, err
		}
	}
	return []jobs.Op{
		jobs.Define(KindActivate, needs(true, true), func(ctx context.Context, env jobs.Env, a LifecycleArgs, p *jobs.Progress) (any, error) {
			act, err := env.Base.Catalog.Activate(ctx, a.Corpus, a.Service, 0, p.Set)
			return api.Activation{Corpus: a.Corpus, Service: a.Service, Entries: act.Entries, Added: act.Added, RunOpened: act.RunOpened}, err
		}),
		jobs.Define(KindExtend, needs(true, false), func(ctx context.Context, env jobs.Env, a LifecycleArgs, p *jobs.Progress) (any, error) {
			ext, err := env.Base.Catalog.Extend(ctx, a.Corpus, 0, p.Set)
			return api.Extension{Corpus: a.Corpus, Services: ext.Services, Entries: ext.Entries, Added: ext.Added, Skipped: ext.Skipped}, err
		}),
		jobs.Define(KindDeactivate, needs(true, true), deletion(func(c *catalog.Catalog, ctx context.Context, a LifecycleArgs, o catalog.DeleteOptions) (catalog.Removal, error) {
			return c.Deactivate(ctx, a.Corpus, a.Service, o)
		})),
		jobs.Define(KindDeleteCorpus, needs(true, false), deletion(func(c *catalog.Catalog, ctx context.Context, a LifecycleArgs, o catalog.DeleteOptions) (catalog.Removal, error) {
			return c.DeleteCorpus(ctx, a.Corpus, o)
		})),
		jobs.Define(KindDeleteService, needs(false, true), deletion(func(c *catalog.Catalog, ctx context.Context, a LifecycleArgs, o catalog.DeleteOptions) (catalog.Removal, error) {
			return c.DeleteService(ctx, a.Service, o)
		})),
	}
}
