package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
)

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "add a task for each source archive under PATHs (idempotent)",
		ArgsUsage: "PATH...",
		Description: "Walks each PATH recursively (a PATH may also be a single archive) and adds one task of --service\n" +
			"for every *.zip file that is not itself a result archive. Result archives are the ones workers'\n" +
			"results are published as, beside their source: <service>.zip and <service>.sandbox-<id>.zip, for\n" +
			"any service in the database; they are skipped. A task's entry is the archive's absolute path.\n" +
			"\n" +
			"--from-list FILE reads entries from a newline-separated list of paths instead of walking (for huge\n" +
			"corpora; relative paths are taken from the current directory; the same *.zip and result archive\n" +
			"rule applies; files are not checked).\n" +
			"\n" +
			"The corpus is created if missing. Its path is the deepest directory holding every PATH (with\n" +
			"--from-list, every entry); every entry must lie beneath the path of the corpus, and a symbolic\n" +
			"link among the walked archives must lead to a file beneath it (relative links only): otherwise the\n" +
			"import is refused and nothing is added. Replicas read sources and write results beneath that path\n" +
			"only. An entry that already has a task of the corpus and service is left alone, so importing again\n" +
			"only adds what is new. A run of the corpus and service is opened if none is.\n" +
			"\n" +
			"Entries are added as they are found, a batch at a time, in one transaction (memory does not grow\n" +
			"with their count; --from-list is read twice, first for the corpus path and the count). On a\n" +
			"terminal a progress line (a bar with --from-list) shows how far it is; otherwise a line goes to\n" +
			"stderr every --progress-every.\n" +
			"\n" +
			"--from-cortex URL imports a CorTeX database instead (no PATH, no --service; --corpus, repeatable,\n" +
			"takes those corpora only): its services, corpora and sandboxes, entries, tasks with their\n" +
			"statuses, the finished tasks' messages, runs with their snapshots, workers and runtimes. It only\n" +
			"reads CorTeX's database (a role with SELECT is enough), and may run again: it adds only what\n" +
			"changed. --dry-run counts what it would read, per table. docs/operations.md#moving-from-cortex",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: flagCorpus, Usage: "corpus to import into (created if missing); with --from-cortex, a CorTeX corpus to take (repeat for more; none: all)", EnvVars: envVars("CORPUS")},
			serviceFlag("service the tasks are for (see cortexq service add)"),
			&cli.StringFlag{
				Name:    "from-list",
				Usage:   "read entries from `FILE`, one path a line, instead of walking PATHs",
				EnvVars: envVars("IMPORT_FROM_LIST"),
			},
			&cli.StringFlag{
				Name:    "from-cortex",
				Usage:   "import the CorTeX database at `URL` (a PostgreSQL connection string) instead of walking PATHs",
				EnvVars: envVars("IMPORT_FROM_CORTEX"),
			},
			&cli.BoolFlag{Name: "dry-run", Usage: "with --from-cortex: count what would be read per table, write nothing", EnvVars: envVars("IMPORT_DRY_RUN")},
			&cli.DurationFlag{
				Name:    "progress-every",
				Usage:   "when stderr is not a terminal, print a progress line this often (0: none)",
				Value:   5 * time.Second,
				EnvVars: envVars("IMPORT_PROGRESS_EVERY"),
			},
		},
		Action: runImport,
	}
}

func runImport(c *cli.Context) error {
	if c.IsSet("from-cortex") {
		return runImportCortex(c)
	}
	paths, err := positional(c)
	if err != nil {
		return err
	}
	corpora := c.StringSlice(flagCorpus)
	switch {
	case len(corpora) == 0:
		return usagef(c, "--%s is required", flagCorpus)
	case len(corpora) > 1:
		return usagef(c, "want one --%s (several only with --from-cortex)", flagCorpus)
	case c.Bool("dry-run"):
		return usagef(c, "--dry-run goes with --from-cortex")
	}
	corpus := corpora[0]
	if err := required(c, flagService); err != nil {
		return err
	}
	list := c.String("from-list")
	switch {
	case len(paths) == 0 && list == "":
		return usagef(c, "want at least one PATH, or --from-list")
	case len(paths) > 0 && list != "":
		return usagef(c, "give PATHs to walk or --from-list, not both")
	}
	if err := catalog.CheckCorpusName(corpus); err != nil {
		return usagef(c, "--corpus: %v", err)
	}
	return importPaths(c, corpus, paths, list)
}

// importPaths imports the source archives under paths (or listed in list) into corpus, for
// --service: cortexq import and cortexq corpus add.
func importPaths(c *cli.Context, corpus string, paths []string, list string) error {
	// Bad paths fail before anything touches the database.
	sources, err := archive.OpenSources(paths, list)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer sources.Close()
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	serviceID, names, err := importService(c, root)
	if err != nil {
		return err
	}
	began := time.Now()
	if err := sources.Scan(names); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	progress := newImportProgress(c.App.ErrWriter, sources.Total, c.Duration("progress-every"))
	defer progress.stop()
	sum, err := root.Catalog.Import(c.Context, catalog.ImportRequest{
		Corpus: corpus, CorpusPath: sources.Dir, ServiceID: serviceID,
		Each: func(corpusPath string, add func(string) error) error {
			return sources.Each(corpus, corpusPath, func(path string) error {
				if err := add(path); err != nil {
					return err
				}
				progress.add(1)
				return nil
			})
		},
	})
	progress.stop()
	if err != nil {
		return err
	}
	slog.Debug("entries imported", "entries", progress.count(), "skipped", sources.Skipped, "elapsed", time.Since(began))
	printImport(c, corpus, sum, sources.Skipped, time.Since(began))
	return nil
}

// printImport says what an import did.
func printImport(c *cli.Context, corpus string, sum catalog.ImportSummary, skipped int, took time.Duration) {
	created := ""
	if sum.CorpusCreated {
		created = " (created)"
	}
	run := ""
	if sum.RunOpened {
		run = "; opened a run"
	}
	fmt.Fprintf(c.App.Writer, "corpus %s%s, service %s: %d tasks added, %d already present, %d skipped (not source archives)%s, in %s\n",
		corpus, created, c.String(flagService), sum.Added, sum.Existing, skipped, run, took.Round(time.Millisecond))
}

// importService returns the id of the service --service names, and the names of every service
// (whose result archives an import skips).
func importService(c *cli.Context, root *base.Base) (int32, map[string]bool, error) {
	services, err := root.Catalog.Services(c.Context)
	if err != nil {
		return 0, nil, err
	}
	var id int32
	names := make(map[string]bool, len(services))
	for _, s := range services {
		names[s.Name] = true
		if s.Name == c.String(flagService) {
			id = s.ID
		}
	}
	if id == 0 {
		return 0, nil, fmt.Errorf("import: unknown service %s (add it with: cortexq service add %s)", c.String(flagService), c.String(flagService))
	}
	return id, names, nil
}
