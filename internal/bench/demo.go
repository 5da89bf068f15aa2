package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/dispatch"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reaper"
	"github.com/cortexq/cortexq/queue/replica"
	"github.com/cortexq/cortexq/worker"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "convert a generated sample corpus end to end, and show how to audit it",
		Description: "Generates a sample corpus (source archives with a cortex.log) under --dir, imports it for the\n" +
			"service 'echo', starts a replica and echo workers on loopback, shows progress, and prints the\n" +
			"final tally, the throughput and the psql commands to audit what happened. It uses the embedded\n" +
			"PostgreSQL in --home unless --database-url is given. Each run makes a new corpus.\n\n" +
			"With --latexml it converts the project's sample papers (sections and math, a bibliography, an\n" +
			"undefined macro, a missing package, 100+ errors, no .tex at all) with LaTeXML workers for the\n" +
			"service tex_to_html, and prints each paper's status and first messages (docs/latexml.md).",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "tasks", Usage: "sample source archives to generate", Value: 2000, EnvVars: wired.EnvVars("DEMO_TASKS")},
			&cli.IntFlag{Name: "workers", Usage: "echo workers", Value: 4, EnvVars: wired.EnvVars("DEMO_WORKERS")},
			&cli.IntFlag{Name: "payload-kb", Usage: "size of each sample archive's payload", Value: 8, EnvVars: wired.EnvVars("DEMO_PAYLOAD_KB")},
			&cli.StringFlag{Name: "dir", Usage: "where the sample corpus goes; empty: <home>/demo", EnvVars: wired.EnvVars("DEMO_DIR")},
			&cli.BoolFlag{Name: "latexml", Usage: "convert the project's sample papers to HTML with LaTeXML (service tex_to_html) instead; --workers defaults to 2", EnvVars: wired.EnvVars("DEMO_LATEXML")},
			&cli.DurationFlag{Name: "latexml-timeout", Usage: "with --latexml: the conversion timeout (the service's lease is a minute longer)", Value: demoLatexmlTimeoutDefault, EnvVars: wired.EnvVars("DEMO_LATEXML_TIMEOUT")},
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	if c.Bool("latexml") {
		return runLatexmlDemo(c)
	}
	wired.TuneGC()
	if c.Int("tasks") < 1 || c.Int("workers") < 1 || c.Int("payload-kb") < 0 {
		return wired.Usagef(c, "--tasks and --workers must be at least 1, --payload-kb at least 0")
	}
	out := c.App.Writer
	ctx := c.Context
	// The demo serves workers in this process: its connections are set up as a replica's.
	root, closeStore, err := wired.OpenBase(c, lease.TunePool)
	if err != nil {
		return err
	}
	defer closeStore()
	svc, err := EnsureService(ctx, root, "echo")
	if err != nil {
		return fmt.Errorf("service echo: %w", err)
	}
	name := "demo-" + time.Now().Format("20060102-150405")
	dir := c.String("dir")
	if dir == "" {
		dir = filepath.Join(c.String(wired.HomeFlag), "demo")
	}
	dir, _ = filepath.Abs(filepath.Join(dir, name))
	fmt.Fprintf(out, "Generating %d sample source archives in %s\n", c.Int("tasks"), dir)
	entries, err := StageCorpus(ctx, dir, c.Int("tasks"), c.Int("payload-kb")*1024)
	if err != nil {
		return err
	}
	sum, err := root.Catalog.Import(ctx, catalog.ImportRequest{Corpus: name, CorpusPath: dir, ServiceID: svc.ID, Entries: entries})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Imported %d tasks as corpus %s, service echo\n", sum.Added, name)

	rep, err := startDemoReplica(ctx, root, lease.Config{Replica: "demo", LeaseTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer rep.close()
	runCtx, srvDone, vent, sink, quiet := rep.ctx, rep.done, rep.vent, rep.sink, rep.quiet
	fmt.Fprintf(out, "Replica on %s (tasks) and %s (results); %d echo workers\n", vent, sink, c.Int("workers"))
	start := time.Now()
	wDone := make(chan error, 1)
	go func() {
		wDone <- worker.Run(runCtx, worker.Config{
			Ventilator: vent, Sink: sink, Service: "echo", Identity: "demo-echo",
			Concurrency: c.Int("workers"), Throttle: 100 * time.Millisecond, IOTimeout: 30 * time.Second,
			Backoff: 200 * time.Millisecond, Logger: quiet,
		}, worker.Echo{})
	}()

	tty := wired.IsTerminal(os.Stderr)
	p, err := demoProgress(ctx, root, name, "echo", start, tty, srvDone)
	if err != nil {
		return err
	}
	took := time.Since(start)
	if tty {
		fmt.Fprintln(os.Stderr)
	}
	if err := rep.stopWith(wDone, "echo workers"); err != nil {
		return err
	}
	return demoSummary(c, root, name, entries, p, took, sum.CorpusID)
}

// demoSummary prints what the demo did and how to audit it, and fails a demo whose tasks did not
// all come back NoProblem with their archives intact.
func demoSummary(c *cli.Context, root *base.Base, name string, entries []string, p inspect.Progress, took time.Duration, corpus int32) error {
	out, ctx := c.App.Writer, c.Context
	bad, firstBad := ByteIdentical(entries, "echo")
	mb := float64(p.Done()) * float64(c.Int("payload-kb")) / 1024 * 2
	fmt.Fprintf(out, "\nDone: %d tasks in %s: %.0f tasks/s, %.1f MB/s (source + result)\n", p.Done(), took.Round(time.Millisecond),
		float64(p.Done())/took.Seconds(), mb/took.Seconds())
	fmt.Fprintf(out, "  no_problem %d  warning %d  error %d  fatal %d  invalid %d\n", p.NoProblem, p.Warning, p.Error, p.Fatal, p.Invalid)
	fmt.Fprintf(out, "  result archives identical to their sources: %d of %d\n", len(entries)-bad, len(entries))
	self := selfCommand(c)
	fmt.Fprintf(out, "\nAudit it with psql:\n")
	fmt.Fprintf(out, "  %s db psql -c \"SELECT task_status_name(status), count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE c.name = '%s' GROUP BY 1\"\n", self, name)
	fmt.Fprintf(out, "  %s db psql -c \"SELECT * FROM audit_worker_activity\"\n", self)
	fmt.Fprintf(out, "  %s task show %d\n", self, firstTask(ctx, root, corpus))
	if p.NoProblem != int64(len(entries)) || bad > 0 {
		return fmt.Errorf("demo: %d of %d tasks NoProblem, %d results differ (%v)", p.NoProblem, len(entries), bad, firstBad)
	}
	return nil
}

// demoProgress shows the progress of a demo's corpus name and service until its tasks are done,
// ctx ends or the replica stops (srvDone); on a terminal the bar is redrawn in place.
func demoProgress(ctx context.Context, root *base.Base, name, service string, start time.Time, tty bool, srvDone <-chan error) (inspect.Progress, error) {
	// On a terminal the bar is redrawn in place; elsewhere (a log, CI) it is a line every few
	// seconds.
	var p inspect.Progress
	var shown time.Time
	for {
		ps, err := root.Inspect.Progress(ctx, name, service)
		if err != nil {
			return p, err
		}
		if len(ps) == 1 {
			p = ps[0]
		}
		switch {
		case tty:
			fmt.Fprintf(os.Stderr, "\r%s  %d/%d", wired.Bar(p.Done(), p.Tasks, 40), p.Done(), p.Tasks)
		case p.Finished() || time.Since(shown) >= demoProgressEvery:
			fmt.Fprintf(os.Stderr, "%s  %d/%d  %s\n", wired.Bar(p.Done(), p.Tasks, 40), p.Done(), p.Tasks,
				time.Since(start).Round(time.Second))
			shown = time.Now()
		}
		if p.Finished() {
			break
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(os.Stderr)
			}
			return p, fmt.Errorf("interrupted with %d of %d tasks done", p.Done(), p.Tasks)
		case err := <-srvDone:
			return p, fmt.Errorf("replica stopped: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return p, nil
}

// demoProgressEvery is how often the demo prints a progress line when stderr is not a terminal.
const demoProgressEvery = 3 * time.Second

// selfCommand is how to run this binary again on the same embedded database, for the audit
// hints: the path it was started by, and --home when it was given on the command line. (A
// --database-url is not repeated: it may hold a password.)
func selfCommand(c *cli.Context) string {
	self := "cortexq"
	if strings.ContainsRune(os.Args[0], '/') {
		self = os.Args[0]
	}
	if c.IsSet(wired.HomeFlag) && os.Getenv("CORTEXQ_HOME") == "" && c.String(wired.DatabaseURLFlag) == "" {
		self += " --home " + c.String(wired.HomeFlag)
	}
	return self
}

// firstTask returns the lowest task id of a corpus, for the audit hint.
func firstTask(ctx context.Context, root *base.Base, corpus int32) int64 {
	var id int64
	_ = root.Pool.QueryRow(ctx, `SELECT coalesce(min(id), 0) FROM tasks WHERE corpus_id = $1`, corpus).Scan(&id)
	return id
}

// demoReplica is the replica a demo runs in its own process (queue/replica): a dispatch server
// on loopback and a reaper. Workers run until ctx ends (cancel), which stops the replica too;
// done yields the replica's error once it stopped.
type demoReplica struct {
	ctx        context.Context
	cancel     context.CancelFunc
	done       chan error
	vent, sink string
	quiet      *slog.Logger // the demo's parts log only at debug level
}

// startDemoReplica starts a replica on loopback ports for a demo, leasing as lcfg says.
func startDemoReplica(ctx context.Context, root *base.Base, lcfg lease.Config) (*demoReplica, error) {
	r := &demoReplica{quiet: slog.New(slog.DiscardHandler), done: make(chan error, 1)}
	if slog.Default().Enabled(ctx, slog.LevelDebug) {
		r.quiet = slog.Default()
	}
	rep, err := replica.New(root, replica.Config{
		Lease: lcfg,
		Dispatch: dispatch.Config{
			VentilatorAddr: "tcp://127.0.0.1:*", SinkAddr: "tcp://127.0.0.1:*", Logger: r.quiet, SyncArchives: true,
		},
		Reaper: reaper.Config{Interval: 5 * time.Second, Logger: r.quiet},
	})
	if err != nil {
		return nil, err
	}
	if err := rep.Start(ctx); err != nil {
		return nil, err
	}
	if r.vent, r.sink, err = rep.Server().Endpoints(ctx); err != nil {
		rep.Stop()
		return nil, err
	}
	r.ctx, r.cancel = context.WithCancel(ctx)
	go func() {
		select {
		case <-r.ctx.Done():
		case <-rep.Failed():
		}
		rep.Stop()
		r.done <- rep.Err()
	}()
	return r, nil
}

// stopWith stops the workers (whose Run returns on wDone) and the replica, and reports the first
// failure of either.
func (r *demoReplica) stopWith(wDone <-chan error, workers string) error {
	r.cancel()
	wErr := <-wDone
	if err := <-r.done; err != nil {
		return err
	}
	if wErr != nil && !errors.Is(wErr, context.Canceled) {
		return fmt.Errorf("%s: %w", workers, wErr)
	}
	return nil
}

// close stops the workers and the replica.
func (r *demoReplica) close() { r.cancel() }
