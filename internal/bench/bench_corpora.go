package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
)

// bench --corpora: several corpora of the bench's service, each with its backlog of TODO tasks,
// served by fair share (docs/semantics.md#fair-share). A run stops once --tasks tasks are
// converted: large backlogs are never drained, so only the archives a run can reach are staged
// (the rest of a backlog is generated in the database, docs/performance.md#fair-share).

// benchCorpus is one corpus of a --corpora run.
type benchCorpus struct {
	name    string
	id      int32
	tasks   int
	entries []string // the staged archives: the first of its tasks
}

// benchCorpusReport is what a --corpora run reports of each corpus.
type benchCorpusReport struct {
	Name      string `json:"name"`
	Tasks     int    `json:"tasks"`
	NoProblem int64  `json:"no_problem"`
	// FinishedSeconds is when its last task's result was recorded, in seconds since the
	// measurement started (the workers' start); absent when it did not finish.
	FinishedSeconds *float64 `json:"finished_s,omitempty"`
}

// parseCorpora reads --corpora: TODO tasks per corpus, comma-separated.
func parseCorpora(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 100_000_000 {
			return nil, fmt.Errorf("--corpora %q: want TODO tasks per corpus, comma-separated, each 1 to 100000000", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// stageCorpora makes the corpora of a --corpora run, in order (the first gets the lowest task
// ids): for each, the first reach archives are staged and imported, and the rest of its tasks
// generated in the database. It returns the corpora and every staged entry.
func stageCorpora(ctx context.Context, root *base.Base, svc catalog.Service, dir, name string, counts []int, reach, size int,
	logf func(string, ...any)) ([]benchCorpus, []string, error) {
	var out []benchCorpus
	var all []string
	for i, n := range counts {
		bc := benchCorpus{name: fmt.Sprintf("%s-c%d", name, i+1), tasks: n}
		cdir := filepath.Join(dir, bc.name)
		staged := min(n, reach)
		logf("corpus %s: %d TODO tasks, %d archives staged in %s", bc.name, n, staged, cdir)
		entries, err := StageCorpus(ctx, cdir, staged, size)
		if err != nil {
			return nil, nil, err
		}
		imp, err := root.Catalog.Import(ctx, catalog.ImportRequest{Corpus: bc.name, CorpusPath: cdir, ServiceID: svc.ID, Entries: entries})
		if err != nil {
			return nil, nil, err
		}
		bc.id, bc.entries = imp.CorpusID, entries
		if n > staged {
			if _, err := benchGenerateTasks(ctx, root.Pool, svc.ID, bc.id, cdir, staged, n-1); err != nil {
				return nil, nil, err
			}
		}
		out = append(out, bc)
		all = append(all, entries...)
	}
	return out, all, nil
}

// corporaDone sums the NoProblem tasks of the corpora.
func corporaDone(ctx context.Context, root *base.Base, svc catalog.Service, corpora []benchCorpus, since time.Time) (int64, error) {
	var done int64
	for _, bc := range corpora {
		n, _, err := benchCorpusDone(ctx, root.Pool, bc.id, svc.ID, since)
		if err != nil {
			return 0, err
		}
		done += n
	}
	return done, nil
}

// reportCorpora tells, for each corpus, its NoProblem tasks and when it finished.
func reportCorpora(ctx context.Context, root *base.Base, svc catalog.Service, corpora []benchCorpus, since time.Time) ([]benchCorpusReport, error) {
	var out []benchCorpusReport
	for _, bc := range corpora {
		n, last, err := benchCorpusDone(ctx, root.Pool, bc.id, svc.ID, since)
		if err != nil {
			return nil, err
		}
		r := benchCorpusReport{Name: bc.name, Tasks: bc.tasks, NoProblem: n}
		if n == int64(bc.tasks) {
			s := float64(last.Milliseconds()) / 1000
			r.FinishedSeconds = &s
		}
		out = append(out, r)
	}
	return out, nil
}

// resultsIdentical checks the result archives the run wrote (a --corpora run converts only
// some of the staged archives): each equals its source. It returns how many differ and how many
// results there are.
func resultsIdentical(entries []string, service string) (bad, results int) {
	var done []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(filepath.Dir(e), service+".zip")); err == nil {
			done = append(done, e)
		}
	}
	bad, _ = ByteIdentical(done, service)
	return bad, len(done)
}
