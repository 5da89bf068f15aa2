package main

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/cortex"
)

// runImportCortex imports a CorTeX database (cortexq import --from-cortex URL): what it brings
// is in queue/cortex; then the report rollups are folded, so that reports show it at once.
func runImportCortex(c *cli.Context) error {
	paths, err := positional(c)
	if err != nil {
		return err
	}
	switch {
	case len(paths) > 0 || c.IsSet("from-list"):
		return usagef(c, "--from-cortex reads a database: no PATH or --from-list")
	case c.IsSet(flagService):
		return usagef(c, "--from-cortex brings CorTeX's services: no --%s", flagService)
	}
	cfg, err := pgx.ParseConfig(c.String("from-cortex"))
	if err != nil {
		return usagef(c, "--from-cortex: %v", err)
	}
	// Read only, twice over: the import's transaction is READ ONLY, and so is every one of this
	// session's.
	cfg.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.RuntimeParams["application_name"] = "cortexq import"
	src, err := pgx.ConnectConfig(c.Context, cfg)
	if err != nil {
		return fmt.Errorf("connect to CorTeX: %w", err)
	}
	defer src.Close(c.Context)
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	began := time.Now()
	sum, err := cortex.Import(c.Context, src, root.Pool, cortex.Config{
		Corpora: c.StringSlice(flagCorpus), DryRun: c.Bool("dry-run"), Progress: c.App.ErrWriter,
	})
	if err != nil {
		return fmt.Errorf("import from CorTeX: %w", err)
	}
	if c.Bool("dry-run") {
		for _, t := range sum.DryRun {
			fmt.Fprintf(c.App.Writer, "%-18s %12d\n", t.Table, t.Rows)
		}
		return nil
	}
	if err := foldAll(c, root); err != nil {
		return err
	}
	printImportCortex(c, sum, time.Since(began))
	return nil
}

// printImportCortex says what an import from CorTeX did, a line a corpus.
func printImportCortex(c *cli.Context, sum cortex.Summary, took time.Duration) {
	for _, cs := range sum.Corpora {
		fmt.Fprintf(c.App.Writer, "corpus %s: %d entries, %d tasks (%d added, %d updated), %d messages, %d runs added, %d task statuses of closed runs\n",
			printable(cs.Corpus), cs.Entries, cs.Tasks, cs.Added, cs.Updated, cs.Messages, cs.Runs, cs.Snapshots)
	}
	fmt.Fprintf(c.App.Writer, "%d services, %d corpora, %d workers added or brought up to date, in %s\n",
		sum.Services, len(sum.Corpora), sum.Workers, took.Round(time.Millisecond))
}
