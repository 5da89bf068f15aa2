package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/inspect"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the progress of every corpus and service",
		Description: "One line per corpus and service: tasks; TODO; tasks reserved by a replica (not yet handed to a\n" +
			"worker, or handed and the worker not yet recorded); leases in flight; rows settling (held for late\n" +
			"results); queued retries; dead letters (tasks whose current run gave up: a stand-in Fatal); each\n" +
			"final status and blocked (paused); replies and leases over the last minute, and the corpus's share of\n" +
			"its service's leases over the last minute (its fair share as served, see cortexq corpus). With\n" +
			"--watch, a progress bar each, refreshed every --interval until interrupted or nothing is left to\n" +
			"lease or running.",
		Flags: []cli.Flag{
			corpusFlag("only this corpus"),
			serviceFlag("only this service"),
			&cli.BoolFlag{
				Name:    "watch",
				Usage:   "refresh with progress bars until interrupted or all done",
				EnvVars: envVars("STATUS_WATCH"),
			},
			&cli.BoolFlag{
				Name:    "json",
				Usage:   "print the progress as GET /api/v1/status answers it (not with --watch)",
				EnvVars: envVars("STATUS_JSON"),
			},
			&cli.DurationFlag{
				Name:    "interval",
				Usage:   "refresh interval of --watch",
				Value:   2 * time.Second,
				EnvVars: envVars("STATUS_INTERVAL"),
			},
		},
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	watch, interval := c.Bool("watch"), c.Duration("interval")
	if interval <= 0 {
		return usagef(c, "--interval: want a positive duration")
	}
	if watch && c.Bool("json") {
		return usagef(c, "give --watch or --json, not both")
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	// A mistyped name is an error, not "no tasks" (which --watch would take for "all done").
	if err := root.Catalog.CheckNames(c.Context, c.String(flagCorpus), c.String(flagService)); err != nil {
		return err
	}
	clear := watch && isTerminal(os.Stdout)
	for frame := 0; ; frame++ {
		rows, err := root.Inspect.Progress(c.Context, c.String(flagCorpus), c.String(flagService))
		if err != nil {
			if c.Context.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		if c.Bool("json") {
			return printJSON(c, api.NewStatus(rows))
		}
		switch {
		case clear:
			fmt.Fprint(c.App.Writer, "\x1b[H\x1b[2J")
		case watch && frame > 0:
			fmt.Fprintln(c.App.Writer)
		}
		if watch {
			fmt.Fprintf(c.App.Writer, "%s (every %s, ^C to stop)\n", zoned(time.Now(), time.DateTime), interval)
		}
		if err := printProgress(c.App.Writer, rows, watch); err != nil {
			return err
		}
		if err := checkInvariants(c, root); err != nil {
			return err
		}
		if !watch || allFinished(rows) {
			return nil
		}
		select {
		case <-c.Context.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

func allFinished(rows []inspect.Progress) bool {
	for _, r := range rows {
		if !r.Finished() {
			return false
		}
	}
	return true
}

func printProgress(out io.Writer, rows []inspect.Progress, bars bool) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(out, "no tasks")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "CORPUS\tSERVICE\tTASKS\tTODO\tRESERVED\tIN_FLIGHT\tSETTLING\tQUEUED\tDEAD_LETTERS\t"+
		"NO_PROBLEM\tWARNING\tERROR\tFATAL\tINVALID\tBLOCKED\tREPLIES/MIN\tLEASES/MIN\tSHARE\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f%%\t\n",
			printable(r.Corpus), printable(r.Service), r.Tasks, r.TODO, r.Reserved, r.InFlight, r.Settling, r.Queued, r.DeadLetters,
			r.NoProblem, r.Warning, r.Error, r.Fatal, r.Invalid, r.Blocked, r.RepliesLastMinute, r.LeasesLastMinute, 100*r.LeaseShare)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if !bars {
		return nil
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		state := ""
		if r.Finished() {
			state = "  done"
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%d/%d%s\n", printable(r.Corpus), printable(r.Service), bar(r.Done(), r.Tasks, 40), r.Done(), r.Tasks, state)
	}
	return w.Flush()
}

// bar draws done out of total as a progress bar width characters wide, with its percentage.
func bar(done, total int64, width int) string {
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	n := int(frac * float64(width))
	return fmt.Sprintf("[%s%s] %5.1f%%", strings.Repeat("#", n), strings.Repeat(".", width-n), 100*frac)
}

// checkInvariants runs the invariant queries of sql/audit/invariants.sql and reports any broken
// rule loudly on stderr, failing the command: a broken invariant is a bug to report, never a
// state to operate in.
func checkInvariants(c *cli.Context, root *base.Base) error {
	violations, err := root.Inspect.CheckInvariants(c.Context)
	if err != nil {
		return err
	}
	if len(violations) == 0 {
		return nil
	}
	w := c.App.ErrWriter
	fmt.Fprintln(w, "!!! INVARIANT VIOLATED: the dispatch state breaks rules it must keep (sql/audit/invariants.sql)")
	for _, v := range violations {
		fmt.Fprintf(w, "!!!   %s\n", v)
	}
	fmt.Fprintln(w, "!!! Run the named queries of sql/audit/invariants.sql (in the cortexq source repository) in psql to see the rows, and report a bug.")
	return fmt.Errorf("%d invariant(s) violated: %s", len(violations), violations[0].Rule)
}
