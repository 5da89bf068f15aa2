package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/worker"
	"github.com/cortexq/cortexq/worker/latexml"
	"github.com/cortexq/cortexq/worker/sandbox"
)

// demoLatexmlTimeoutDefault is the demo's conversion timeout: the samples take seconds.
const demoLatexmlTimeoutDefault = 2 * time.Minute

// demoLeaseMargin is how much longer than the conversion timeout the demo's lease is, so that a
// conversion that runs to its timeout still answers within its lease.
const demoLeaseMargin = time.Minute

// runLatexmlDemo is `cortexq demo --latexml`: the project's sample papers imported for
// tex_to_html, converted by a replica and LaTeXML workers in this process, and a summary of each
// task's status and messages.
func runLatexmlDemo(c *cli.Context) error {
	wired.TuneGC()
	out := c.App.Writer
	ctx := c.Context
	timeout, workers, prog, err := latexmlDemoFlags(c)
	if err != nil {
		return err
	}
	leaseTimeout := timeout + demoLeaseMargin
	root, closeStore, err := wired.OpenBase(c, lease.TunePool)
	if err != nil {
		return err
	}
	defer closeStore()
	svc, err := latexmlDemoService(ctx, root, timeout, leaseTimeout)
	if err != nil {
		return err
	}

	name := "latexml-demo-" + time.Now().Format("20060102-150405")
	dir := c.String("dir")
	if dir == "" {
		dir = filepath.Join(c.String(wired.HomeFlag), "demo")
	}
	dir, _ = filepath.Abs(filepath.Join(dir, name))
	entries, err := stageLatexmlSamples(dir)
	if err != nil {
		return err
	}
	sum, err := root.Catalog.Import(ctx, catalog.ImportRequest{Corpus: name, CorpusPath: dir, ServiceID: svc.ID, Entries: entries})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Imported %d sample papers from %s as corpus %s, service %s (lease %s, conversion timeout %s)\n",
		sum.Added, dir, name, wired.LatexmlService, leaseTimeout, timeout)

	rep, err := startDemoReplica(ctx, root, lease.Config{Replica: "demo", LeaseTimeout: leaseTimeout})
	if err != nil {
		return err
	}
	defer rep.close()
	start := time.Now()
	wDone := startLatexmlWorkers(ctx, out, rep, workers, prog, timeout)
	p, err := demoProgress(ctx, root, name, wired.LatexmlService, start, false, rep.done)
	if err != nil {
		return err
	}
	took := time.Since(start)
	if err := rep.stopWith(wDone, "latexml workers"); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nDone: %d papers in %s\n", p.Done(), took.Round(time.Millisecond))
	fmt.Fprintf(out, "  no_problem %d  warning %d  error %d  fatal %d  invalid %d\n\n", p.NoProblem, p.Warning, p.Error, p.Fatal, p.Invalid)

	wrong, err := printLatexmlTasks(ctx, out, root, sum.CorpusID)
	if err != nil {
		return err
	}
	// The drill-down reads the report rollups: fold the demo's results into them now rather
	// than wait for the replica's periodic fold.
	if _, err := root.Reports.FoldAll(ctx, 0); err != nil {
		return err
	}
	if err := printDemoReport(c, out, name); err != nil {
		return err
	}
	printLatexmlHints(c, out, root, name, sum.CorpusID, entries)
	if err := printDemoStages(ctx, out, root, svc.ID, sum.CorpusID); err != nil {
		return err
	}
	if wrong > 0 {
		return fmt.Errorf("demo: %d of %d sample papers did not get the status they are documented to get", wrong, len(entries))
	}
	return nil
}

// startLatexmlWorkers runs the demo's LaTeXML workers on rep, sandboxed where this machine can
// (as cortexq worker latexml; the samples are the project's own, so without bwrap the demo runs
// them unconfined and says so); their Run's error comes on the channel returned.
func startLatexmlWorkers(ctx context.Context, out io.Writer, rep *demoReplica, workers int, prog string, timeout time.Duration) <-chan error {
	sb, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Bwrap})
	if err != nil {
		sb = sandbox.Unconfined()
	}
	fmt.Fprintf(out, "Replica on %s (tasks) and %s (results); %d LaTeXML workers running %s, sandbox %s\n", rep.vent, rep.sink, workers, prog, sb.Mode())
	wDone := make(chan error, 1)
	go func() {
		wDone <- worker.Run(rep.ctx, worker.Config{
			Ventilator: rep.vent, Sink: rep.sink, Service: wired.LatexmlService, Identity: "demo-latexml",
			Concurrency: workers, Throttle: 100 * time.Millisecond, IOTimeout: 30 * time.Second,
			Backoff: 200 * time.Millisecond, Logger: rep.quiet,
		}, latexml.New(latexml.Config{Latexmlc: prog, Timeout: timeout, Logger: rep.quiet, Sandbox: sb}))
	}()
	return wDone
}

// latexmlDemoFlags checks demo --latexml's flags, and finds latexmlc.
func latexmlDemoFlags(c *cli.Context) (timeout time.Duration, workers int, prog string, err error) {
	timeout = c.Duration("latexml-timeout")
	if timeout <= 0 {
		return 0, 0, "", wired.Usagef(c, "--latexml-timeout %s: want a positive duration", timeout)
	}
	workers = 2 // the samples are few, and a conversion keeps a core busy
	if c.IsSet("workers") {
		workers = c.Int("workers")
	}
	if workers < 1 {
		return 0, 0, "", wired.Usagef(c, "--workers must be at least 1")
	}
	prog, err = exec.LookPath(latexml.LatexmlcDefault)
	if err != nil {
		return 0, 0, "", fmt.Errorf("demo --latexml needs LaTeXML's latexmlc (Debian and Ubuntu: apt-get install latexml; scripts/install-deps does it): %w", err)
	}
	return timeout, workers, prog, nil
}

// stageLatexmlSamples writes the project's sample papers as source archives beneath dir.
func stageLatexmlSamples(dir string) ([]string, error) {
	entries := make([]string, len(latexml.Samples))
	for i, s := range latexml.Samples {
		data, err := s.Zip()
		if err != nil {
			return nil, err
		}
		entries[i] = filepath.Join(dir, s.Name, s.Name+".zip")
		if err := os.MkdirAll(filepath.Dir(entries[i]), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(entries[i], data, 0o644); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// printLatexmlHints says how to look closer at the demo's corpus name.
func printLatexmlHints(c *cli.Context, out io.Writer, root *base.Base, name string, corpus int32, entries []string) {
	ctx := c.Context
	self := selfCommand(c)
	fmt.Fprintf(out, "\nLook closer:\n")
	fmt.Fprintf(out, "  %s task show %d\n", self, firstTask(ctx, root, corpus))
	fmt.Fprintf(out, "  %s db psql -c \"SELECT m.severity, m.category, m.what, count(DISTINCT m.task_id) AS tasks FROM task_messages m JOIN tasks t ON t.id = m.task_id AND t.run = m.run JOIN corpora c ON c.id = t.corpus_id WHERE c.name = '%s' AND m.severity <> 'info' GROUP BY 1, 2, 3 ORDER BY 4 DESC\"\n", self, name)
	fmt.Fprintf(out, "  unzip -l %s\n", filepath.Join(filepath.Dir(entries[0]), wired.LatexmlService+".zip"))
	fmt.Fprintf(out, "  %s runs --corpus %s --service %s --stages --slowest 10\n", self, name, wired.LatexmlService)
}

// latexmlDemoService returns the service tex_to_html, adding it with leaseTimeout if it is new.
// An existing service whose lease is shorter than the conversion timeout is refused: a
// conversion running to its timeout would be retried while it runs.
func latexmlDemoService(ctx context.Context, root *base.Base, timeout, leaseTimeout time.Duration) (catalog.Service, error) {
	svc, err := root.Catalog.Service(ctx, wired.LatexmlService)
	if errors.Is(err, queue.ErrNotFound) {
		svc, err = root.Catalog.AddService(ctx, wired.LatexmlService, leaseTimeout)
		if errors.Is(err, queue.ErrDuplicate) {
			svc, err = root.Catalog.Service(ctx, wired.LatexmlService)
		}
	}
	if err != nil {
		return svc, fmt.Errorf("service %s: %w", wired.LatexmlService, err)
	}
	if svc.LeaseTimeout != 0 && svc.LeaseTimeout <= timeout {
		return svc, fmt.Errorf("service %s has a lease of %s, not longer than the conversion timeout %s: give a shorter --latexml-timeout, or a longer lease with "+
			"psql: UPDATE services SET lease_timeout_seconds = %d WHERE name = '%s'",
			wired.LatexmlService, svc.LeaseTimeout, timeout, int((timeout + demoLeaseMargin).Seconds()), wired.LatexmlService)
	}
	return svc, nil
}

// printLatexmlTasks prints each task of the corpus: its sample, status (and the status the
// sample should get), conversion time and its most telling messages. It returns how many tasks
// did not get their sample's status.
func printLatexmlTasks(ctx context.Context, out io.Writer, root *base.Base, corpus int32) (wrong int, err error) {
	rows, err := root.Pool.Query(ctx, `SELECT id FROM tasks WHERE corpus_id = $1 ORDER BY id`, corpus)
	if err != nil {
		return 0, fmt.Errorf("list tasks: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("list tasks: %w", err)
	}
	want := map[string]queue.Status{}
	for _, s := range latexml.Samples {
		want[s.Name] = s.Want
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSAMPLE\tSTATUS\tEXPECTED\tSECONDS\tMESSAGES (severity:category:what, first ones)")
	for _, id := range ids {
		h, err := root.Inspect.TaskHistory(ctx, id)
		if err != nil {
			return 0, err
		}
		sample := strings.TrimSuffix(filepath.Base(h.Entry), ".zip")
		expected, ok := want[sample]
		mark := "-"
		if ok {
			mark = expected.String()
			if expected != h.Status {
				mark += " (differs!)"
				wrong++
			}
		}
		secs := "-"
		for _, a := range h.Attempts {
			if a.Run == h.Run && a.AnsweredAt != nil {
				secs = fmt.Sprintf("%.1f", a.AnsweredAt.Sub(a.LeasedAt).Seconds())
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", id, wired.Printable(sample), h.Status, mark, secs, wired.Printable(telling(h.Messages, h.Run, 3)))
	}
	return wrong, tw.Flush()
}

// telling lists up to n messages of a run, problems first (Invalid, Fatal, Error, Warning),
// then the Infos that are not loaded files.
func telling(msgs []inspect.RunMessage, run int32, n int) string {
	var picked []string
	for _, sev := range []queue.Severity{queue.SeverityInvalid, queue.SeverityFatal, queue.SeverityError, queue.SeverityWarning, queue.SeverityInfo} {
		for _, m := range msgs {
			if len(picked) == n {
				break
			}
			if m.Run != run || m.Severity != sev || m.Category == "loaded_file" {
				continue
			}
			picked = append(picked, fmt.Sprintf("%s:%s:%s", m.Severity, m.Category, m.What))
		}
	}
	if len(picked) == 0 {
		return "-"
	}
	return strings.Join(picked, "  ")
}

// printDemoReport prints the report drill-down of the demo's corpus, three levels of it, with
// this binary's report command run as operators run it.
func printDemoReport(c *cli.Context, out io.Writer, corpus string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo report: %w", err)
	}
	var global []string
	for _, f := range []string{wired.DatabaseURLFlag, wired.HomeFlag, wired.PGBinFlag} {
		if c.IsSet(f) {
			global = append(global, "--"+f, c.String(f))
		}
	}
	for _, level := range [][]string{nil, {"--severity", "error"}, {"--severity", "error", "--category", "undefined"}} {
		args := append(append(slices.Clone(global), "report", "--corpus", corpus, "--service", wired.LatexmlService), level...)
		fmt.Fprintf(out, "\n$ cortexq %s\n", strings.Join(args[len(global):], " "))
		cmd := exec.CommandContext(c.Context, self, args...)
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("demo report: cortexq %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}
