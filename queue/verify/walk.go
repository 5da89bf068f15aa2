package verify

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cortexq/cortexq/queue/inspect"
)

// walkBatch is how many result archives found on disk are looked up a query.
const walkBatch = 5000

// walkCorpora walks the directory of each corpus of the scope once (corpora of one path
// together), for result archives no task accounts for. A directory that is another corpus's
// path is left to that corpus's walk.
func (r *run) walkCorpora(ctx context.Context) error {
	all, err := r.cfg.Reader.VerifyCorpora(ctx, 0)
	if err != nil {
		return err
	}
	roots := map[string]bool{}
	for _, c := range all {
		if c.Path != "" {
			roots[filepath.Clean(c.Path)] = true
		}
	}
	byPath := map[string][]inspect.VerifyCorpus{}
	var paths []string
	for _, c := range all {
		if c.Path == "" || r.cfg.Scope.CorpusID != 0 && c.ID != r.cfg.Scope.CorpusID {
			continue
		}
		p := filepath.Clean(c.Path)
		if byPath[p] == nil {
			paths = append(paths, p)
		}
		byPath[p] = append(byPath[p], c)
	}
	for _, p := range paths {
		w := &walker{run: r, root: p, corpora: byPath[p], roots: roots}
		if err := w.dir(ctx, p); err != nil {
			return err
		}
		if err := w.flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// walker finds the result archives beneath one corpus path and looks them up in batches.
type walker struct {
	*run
	root    string
	corpora []inspect.VerifyCorpus // the corpora (and sandboxes) of this path, in the scope
	roots   map[string]bool        // every corpus's path
	// The archives found and not yet looked up, and the tasks that could account for them:
	// cands[i] would account for found[owners[i]].
	found  []Finding
	cands  []inspect.ResultCandidate
	owners []int // the index in found of each candidate
}

// dir walks one directory (symbolic links are not followed).
func (w *walker) dir(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil // unreadable: the tasks' own checks report what it holds
	}
	var sources, results []string
	for _, e := range ents {
		name := e.Name()
		switch {
		case e.IsDir():
			sub := filepath.Join(dir, name)
			if w.roots[sub] {
				continue
			}
			if err := w.dir(ctx, sub); err != nil {
				return err
			}
		case !e.Type().IsRegular():
		case w.resultName(name):
			results = append(results, name)
		case strings.HasSuffix(name, ".zip"):
			sources = append(sources, filepath.Join(dir, name))
		}
	}
	for _, name := range results {
		w.add(dir, name, sources)
		if len(w.cands) >= walkBatch {
			if err := w.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// resultName reports whether a file name is a result archive of a known service.
func (w *walker) resultName(name string) bool {
	svc, _, ok := w.parseResult(name)
	return ok && svc != ""
}

// parseResult splits <service>.zip or <service>.sandbox-<id>.zip.
func (w *walker) parseResult(name string) (service string, sandbox int32, ok bool) {
	stem, ok := strings.CutSuffix(name, ".zip")
	if !ok {
		return "", 0, false
	}
	if _, known := w.cfg.Services[stem]; known {
		return stem, 0, true
	}
	if i := strings.LastIndex(stem, ".sandbox-"); i > 0 {
		if _, known := w.cfg.Services[stem[:i]]; known {
			id, err := strconv.ParseInt(stem[i+len(".sandbox-"):], 10, 32)
			if err == nil && id > 0 {
				return stem[:i], int32(id), true
			}
		}
	}
	return "", 0, false
}

// add notes a result archive found in dir, and the tasks that could account for it: of its
// service, in the corpora of this path (a sandbox's: that sandbox), with a source beside it.
func (w *walker) add(dir, name string, sources []string) {
	svc, sandbox, _ := w.parseResult(name)
	svcID := w.cfg.Services[svc]
	if w.cfg.Scope.ServiceID != 0 && svcID != w.cfg.Scope.ServiceID {
		return
	}
	var corpora []int32
	for _, c := range w.corpora {
		if c.SandboxID == sandbox {
			corpora = append(corpora, c.ID)
		}
	}
	if sandbox != 0 && len(corpora) == 0 && w.cfg.Scope.CorpusID != 0 {
		return // another sandbox's, outside the scope
	}
	if sandbox == 0 && len(corpora) == 0 {
		return // only sandboxes of this path are in the scope
	}
	w.p.Archives.Add(1)
	owner := len(w.found)
	w.found = append(w.found, Finding{Kind: Orphan, CorpusID: sandbox, ServiceID: svcID, Path: filepath.Join(dir, name)})
	for _, c := range corpora {
		w.found[owner].CorpusID = c
		if len(sources) == 0 {
			w.cands = append(w.cands, inspect.ResultCandidate{CorpusID: c, ServiceID: svcID, Dir: dir})
			w.owners = append(w.owners, owner)
		}
		for _, s := range sources {
			w.cands = append(w.cands, inspect.ResultCandidate{CorpusID: c, ServiceID: svcID, Entry: s})
			w.owners = append(w.owners, owner)
		}
	}
}

// flush looks the archives found up and reports those no task accounts for.
func (w *walker) flush(ctx context.Context) error {
	if len(w.found) == 0 {
		return nil
	}
	accounted := make([]bool, len(w.found))
	if len(w.cands) > 0 {
		ok, err := w.cfg.Reader.Accounted(ctx, w.cands)
		if err != nil {
			return err
		}
		for i, yes := range ok {
			if yes {
				accounted[w.owners[i]] = true
			}
		}
	}
	for i, f := range w.found {
		if accounted[i] {
			continue
		}
		f.Detail = "no task of this corpus and service has its source in this directory"
		if err := w.run.found(f); err != nil {
			return err
		}
	}
	w.found, w.cands, w.owners = w.found[:0], w.cands[:0], w.owners[:0]
	return nil
}
