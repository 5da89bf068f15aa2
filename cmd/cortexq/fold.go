package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/lease"
)

func foldCommand() *cli.Command {
	return &cli.Command{
		Name:  "fold",
		Usage: "fold the changes noted since the last fold into the report rollups now",
		Description: "The category and what levels of cortexq report read rollups that a periodic job of cortexq\n" +
			"serve folds (--fold-interval). fold does the same at once, for every corpus and service: after\n" +
			"a migration that noted every task, say, or in a test. It waits for no fold running elsewhere\n" +
			"(it says so and exits). docs/reports.md#rollups describes them.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "batch", Usage: "changes folded per transaction", Value: lease.FoldBatchDefault},
		},
		Action: runFold,
	}
}

func runFold(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	store, done, err := openStore(c, lease.Config{})
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	var sum lease.FoldSummary
	for {
		s, err := store.FoldReports(c.Context, c.Int("batch"))
		if err != nil {
			return err
		}
		sum.Changes, sum.Tasks, sum.Batches, sum.Busy = sum.Changes+s.Changes, sum.Tasks+s.Tasks, sum.Batches+s.Batches, s.Busy
		if s.Busy || s.Tasks == 0 {
			break
		}
	}
	if sum.Busy {
		fmt.Fprintf(c.App.Writer, "another fold is running; folded %d changes (%d tasks) before it\n", sum.Changes, sum.Tasks)
		return nil
	}
	fmt.Fprintf(c.App.Writer, "folded %d changes (%d tasks) in %d transactions, %s\n", sum.Changes, sum.Tasks, sum.Batches,
		time.Since(start).Round(time.Millisecond))
	return nil
}
