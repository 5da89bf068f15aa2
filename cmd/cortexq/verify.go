package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/verify"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "compare the database with the files: result archives missing, changed or unaccounted for, sources changed",
		Description: "Reads every task of --corpus and --service (or all) and the files beside them, and prints each\n" +
			"inconsistency (kind, task id, path, what differs), then the count of each kind:\n" +
			"  missing         a finished task's result archive is not there\n" +
			"  size_differs    it is there, of another size than its claim recorded (truncated, replaced)\n" +
			"  altered         of the recorded size, of another SHA-256 (not checked with --quick)\n" +
			"  orphan          a result archive no task of its corpus and service accounts for\n" +
			"  source_missing  a task's source archive is gone\n" +
			"  source_changed  a task's source archive has another size or modification time than when imported\n" +
			"Results recorded by replicas of an earlier release (no size or digest) are checked for presence\n" +
			"only. It exits 1 when it found any. --requeue sends the tasks of the findings it can mend\n" +
			"(missing, size_differs, altered, source_changed) back to TODO in a new run, as cortexq rerun\n" +
			"does, recording the changed sources as they are now. Orphans are not touched: import the corpus\n" +
			"again (its forgotten entries get their tasks back) or remove them. Progress goes to stderr.\n" +
			"The last step of a restore: see docs/operations.md#backup-and-restore. --detach enqueues the\n" +
			"check as a background job instead (cortexq jobs; its findings are counted in the job's result).",
		Flags: []cli.Flag{
			corpusFlag("only this corpus (or sandbox)"),
			serviceFlag("only this service"),
			&cli.BoolFlag{Name: "quick", Usage: "compare result archives by size only, without reading them for their digest", EnvVars: envVars("VERIFY_QUICK")},
			&cli.BoolFlag{Name: "requeue", Usage: "send the tasks of the findings back to TODO in a new run (with --yes; without, print how many)", EnvVars: envVars("VERIFY_REQUEUE")},
			yesFlag("VERIFY_REQUEUE_YES"),
			&cli.IntFlag{Name: "jobs", Usage: "files checked at once", Value: 4, EnvVars: envVars("VERIFY_JOBS")},
			&cli.DurationFlag{Name: "progress-every", Usage: "how often progress goes to stderr (0: never)", Value: 5 * time.Second, EnvVars: envVars("VERIFY_PROGRESS_EVERY")},
			&cli.BoolFlag{Name: "json", Usage: "print each finding as a JSON line, and the counts as a last one", EnvVars: envVars("VERIFY_JSON")},
			detachFlag(),
		},
		Action: runVerify,
	}
}

// errInconsistent is verify's answer when it found something: exit 1, after the report.
var errInconsistent = errors.New("the database and the files disagree (see above)")

func runVerify(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if c.Int("jobs") < 1 {
		return usagef(c, "--jobs: want at least 1")
	}
	if c.Bool("detach") && (c.Bool("requeue") || c.Bool("json") || c.IsSet("jobs")) {
		return usagef(c, "--detach does not go with --requeue, --json or --jobs")
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	if c.Bool("detach") {
		return enqueueDetached(c, root, jobops.KindVerify, jobops.VerifyArgs{Corpus: c.String(flagCorpus), Service: c.String(flagService),
			Quick: c.Bool("quick")})
	}
	scope, err := scopeOfNamed(c, root)
	if err != nil {
		return err
	}
	services, err := root.Catalog.Services(c.Context)
	if err != nil {
		return err
	}
	byName := map[string]int32{}
	names := map[int32]string{}
	for _, s := range services {
		byName[s.Name], names[s.ID] = s.ID, s.Name
	}
	rq := &requeue{byScope: map[queue.Scope][]int64{}}
	out := c.App.Writer
	cfg := verify.Config{Reader: root.Inspect, Scope: scope, Services: byName, Quick: c.Bool("quick"),
		Workers: c.Int("jobs"), Found: func(f verify.Finding) error {
			rq.add(f)
			return printFinding(out, f, names, c.Bool("json"))
		}}
	var p verify.Progress
	began := time.Now()
	stop := verifyProgress(c.App.ErrWriter, &p, c.Duration("progress-every"), began)
	counts, err := verify.Run(c.Context, cfg, &p)
	stop()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "verify: done in %s: %s\n", time.Since(began).Round(time.Millisecond), progressLine(&p))
	printCounts(out, counts, c.Bool("json"))
	if c.Bool("requeue") {
		if err := rq.run(c, root); err != nil {
			return err
		}
	}
	for _, n := range counts {
		if n > 0 {
			return errInconsistent
		}
	}
	return nil
}

func printFinding(w io.Writer, f verify.Finding, names map[int32]string, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(struct {
			verify.Finding
			Service string `json:"service"`
		}{f, names[f.ServiceID]})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	task := "-"
	if f.TaskID != 0 {
		task = fmt.Sprint(f.TaskID)
	}
	_, err := fmt.Fprintf(w, "%-14s task %-10s %s  (%s)\n", f.Kind, task, printable(f.Path), printable(f.Detail))
	return err
}

func printCounts(w io.Writer, counts map[verify.Kind]int64, asJSON bool) {
	if asJSON {
		m := map[string]int64{}
		for _, k := range verify.Kinds {
			m[string(k)] = counts[k]
		}
		b, _ := json.Marshal(map[string]any{"counts": m})
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	parts := make([]string, 0, len(verify.Kinds))
	total := int64(0)
	for _, k := range verify.Kinds {
		parts = append(parts, fmt.Sprintf("%s %s", k, commas(counts[k])))
		total += counts[k]
	}
	fmt.Fprintf(w, "verify: %s found (%s)\n", commas(total), strings.Join(parts, ", "))
}

func progressLine(p *verify.Progress) string {
	return fmt.Sprintf("%s tasks checked, %s result archives found on disk, %s MB read, %s found",
		commas(p.Tasks.Load()), commas(p.Archives.Load()), commas(p.Bytes.Load()>>20), commas(p.Found.Load()))
}

// verifyProgress prints a progress line on w every interval until stop is called.
func verifyProgress(w io.Writer, p *verify.Progress, every time.Duration, began time.Time) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "verify: %s: %s\n", time.Since(began).Round(time.Second), progressLine(p))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// requeue collects the tasks a --requeue runs again, per corpus and service, and the changed
// sources to record as they are now.
type requeue struct {
	byScope map[queue.Scope][]int64
	ids     []int64
	sizes   []int64
	mtimes  []time.Time
}

func (r *requeue) add(f verify.Finding) {
	if !f.Requeueable() {
		return
	}
	s := queue.Scope{CorpusID: f.CorpusID, ServiceID: f.ServiceID}
	r.byScope[s] = append(r.byScope[s], f.TaskID)
	if f.Kind == verify.SourceChanged {
		r.ids, r.sizes, r.mtimes = append(r.ids, f.TaskID), append(r.sizes, f.SourceSize), append(r.mtimes, f.SourceMtime)
	}
}

func (r *requeue) run(c *cli.Context, root *base.Base) error {
	store := root.Lease(lease.Config{})
	scopes := make([]queue.Scope, 0, len(r.byScope))
	for s := range r.byScope {
		scopes = append(scopes, s)
	}
	slices.SortFunc(scopes, func(a, b queue.Scope) int {
		if a.CorpusID != b.CorpusID {
			return int(a.CorpusID - b.CorpusID)
		}
		return int(a.ServiceID - b.ServiceID)
	})
	var total int64
	for s, ids := range r.byScope {
		r.byScope[s] = slices.Compact(slices.Sorted(slices.Values(ids)))
		total += int64(len(r.byScope[s]))
	}
	if !confirm(c, total, fmt.Sprintf("--requeue: %d tasks of %d corpus and service pairs would go back to TODO in a new run", total, len(scopes))) {
		return nil
	}
	if len(r.ids) > 0 {
		if err := store.RecordSources(c.Context, r.ids, r.sizes, r.mtimes); err != nil {
			return err
		}
	}
	var done int64
	for _, s := range scopes {
		ids := r.byScope[s]
		sum, err := store.Rerun(c.Context, lease.RerunScope{CorpusID: s.CorpusID, ServiceID: s.ServiceID,
			TaskIDs: ids, Note: "verify --requeue"})
		if err != nil {
			return fmt.Errorf("requeue corpus %d service %d: %w", s.CorpusID, s.ServiceID, err)
		}
		done += int64(sum.Tasks)
		noteOf(c).matched(done)
		fmt.Fprintf(c.App.Writer, "requeued: corpus %d, service %d: %d tasks back to TODO in a new run\n", s.CorpusID, s.ServiceID, sum.Tasks)
	}
	return nil
}
