package jobops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/jobs"
)

// ImportArgs are an import job's: as `cortexq import`, with absolute paths (the job runs in
// another process, from another directory).
type ImportArgs struct {
	Corpus  string   `json:"corpus"`
	Service string   `json:"service"`
	Paths   []string `json:"paths,omitempty"`
	// FromList is a file of entries, one path a line.
	FromList string `json:"from_list,omitempty"`
	// Batch is how many entries one transaction adds (default catalog.ImportBatchDefault).
	Batch int `json:"batch,omitempty"`
}

func (a ImportArgs) check() error {
	if err := catalog.CheckCorpusName(a.Corpus); err != nil {
		return err
	}
	switch {
	case a.Service == "":
		return errors.New("want a service")
	case (len(a.Paths) == 0) == (a.FromList == ""):
		return errors.New("want paths or from_list (one of them)")
	case a.Batch < 0:
		return errors.New("batch: want a positive size")
	}
	for _, p := range append([]string{a.FromList}, a.Paths...) {
		if p != "" && !filepath.IsAbs(p) {
			return fmt.Errorf("%q: want an absolute path (the job runs in another process)", p)
		}
	}
	return nil
}

// importCursor is how far an import job went: its first Entries entries are added (or were
// present); Added and Existing count them.
type importCursor struct {
	Entries  int64 `json:"entries"`
	Added    int64 `json:"added"`
	Existing int64 `json:"existing"`
}

// ImportResult is an import job's result.
type ImportResult struct {
	Corpus   string `json:"corpus"`
	Service  string `json:"service"`
	Entries  int64  `json:"entries"`
	Added    int64  `json:"added"`
	Existing int64  `json:"existing"`
	Skipped  int    `json:"skipped"`
}

// runImport adds the entries a batch at a time, each batch its own transaction (catalog.Import
// is idempotent), checkpointing after each; a resumed attempt skips the entries done. Unless the
// entries are a list beneath the corpus's path, a first pass checks every entry (beneath the
// corpus's path) so that a refusal adds nothing.
func runImport(ctx context.Context, env jobs.Env, a ImportArgs, p *jobs.Progress) (any, error) {
	sources, err := archive.OpenSources(a.Paths, a.FromList)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer sources.Close()
	serviceID, names, err := serviceNames(ctx, env, a.Service)
	if err != nil {
		return nil, err
	}
	if err := sources.Scan(names); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	// Statistics once at the end (AnalyzeTasks), not after each batch: a million entries would
	// analyze a growing table 50 times (docs/performance.md#import-as-a-job).
	req := catalog.ImportRequest{Corpus: a.Corpus, CorpusPath: sources.Dir, ServiceID: serviceID, BatchSize: a.Batch, NoAnalyze: true}
	first, err := env.Base.Catalog.Import(ctx, req) // the corpus and the run, no entry yet
	if err != nil {
		return nil, err
	}
	corpusPath, err := env.Base.Catalog.CorpusPath(ctx, first.CorpusID)
	if err != nil {
		return nil, err
	}
	total := sources.Total
	if total < 0 || corpusPath != sources.Dir {
		// A walk, or a corpus whose path is not the list's: a pass checks every entry first.
		// (A list's entries all lie beneath its Dir.)
		total = 0
		if err := sources.Each(a.Corpus, corpusPath, func(string) error { total++; return nil }); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
	}
	var cur importCursor
	if _, err := p.Cursor(&cur); err != nil {
		return nil, err
	}
	p.Set(cur.Entries, total)
	size := a.Batch
	if size == 0 {
		size = catalog.ImportBatchDefault
	}
	batch := make([]string, 0, size)
	var seen int64
	flush := func() error {
		req.Entries = batch
		sum, err := env.Base.Catalog.Import(ctx, req)
		if err != nil {
			return err
		}
		cur.Entries, cur.Added, cur.Existing = seen, cur.Added+int64(sum.Added), cur.Existing+int64(sum.Existing)
		batch = batch[:0]
		p.Set(seen, total)
		return p.Checkpoint(ctx, cur)
	}
	err = sources.Each(a.Corpus, corpusPath, func(e string) error {
		if seen++; seen <= cur.Entries {
			return nil
		}
		if batch = append(batch, e); len(batch) == cap(batch) {
			return flush()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if cur.Added >= catalog.AnalyzeAfter {
		env.Base.Catalog.AnalyzeTasks(ctx)
	}
	return ImportResult{Corpus: a.Corpus, Service: a.Service, Entries: seen, Added: cur.Added, Existing: cur.Existing, Skipped: sources.Skipped}, nil
}

// serviceNames returns the id of the named service and the names of all (whose result archives
// an import skips).
func serviceNames(ctx context.Context, env jobs.Env, service string) (int32, map[string]bool, error) {
	services, err := env.Base.Catalog.Services(ctx)
	if err != nil {
		return 0, nil, err
	}
	var id int32
	names := make(map[string]bool, len(services))
	for _, s := range services {
		names[s.Name] = true
		if s.Name == service {
			id = s.ID
		}
	}
	if id == 0 {
		return 0, nil, fmt.Errorf("import: unknown service %s (add it with: cortexq service add %s)", service, service)
	}
	return id, names, nil
}
