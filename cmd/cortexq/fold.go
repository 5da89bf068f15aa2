package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/reports"
)

func foldCommand() *cli.Command {
	return &cli.Command{
		Name:  "fold",
		Usage: "fold the changes noted since the last fold into the report rollups now",
		Description: "The category and what levels of cortexq report read rollups that a periodic job of cortexq\n" +
			"serve folds (--fold-interval). fold does the same at once, for every corpus and service (after\n" +
			"a migration that noted every task, say), waiting for a fold running elsewhere to end first.\n" +
			"docs/reports.md#rollups describes them.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "batch", Usage: "changes folded per transaction", Value: reports.FoldBatchDefault, EnvVars: envVars("FOLD_BATCH")},
		},
		Action: runFold,
	}
}

func runFold(c *cli.Context) error {
	root, done, err := openBaseNoArgs(c)
	if err != nil {
		return err
	}
	defer done()
	return foldAll(c, root)
}

// foldAll folds every noted change, waiting for a fold running elsewhere, and says what it did
// (on stderr when another command folds first).
func foldAll(c *cli.Context, root *base.Base) error {
	batch := reports.FoldBatchDefault
	if c.IsSet("batch") {
		batch = c.Int("batch")
	}
	start := time.Now()
	sum, err := root.Reports.FoldAll(c.Context, batch)
	if err != nil {
		return err
	}
	out := c.App.Writer
	if c.Command.Name != "fold" {
		out = c.App.ErrWriter
	}
	fmt.Fprintf(out, "folded %d changes (%d tasks) in %d transactions, %s\n", sum.Changes, sum.Tasks, sum.Batches,
		time.Since(start).Round(time.Millisecond))
	return nil
}
