package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/audit"
	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/lease"
)

func pruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "drop the history of old runs (kept statuses, diff matrices, attempts, message logs)",
		Description: "Every rerun adds history: the closed run's row and its tasks' statuses (cortexq runs, diff), the\n" +
			"attempts of the tasks' earlier runs (task show). prune drops that of the runs outside the last\n" +
			"--keep N of each corpus and service, or that ended before --before DATE (2006-01-02, or RFC 3339),\n" +
			"for one --corpus and --service, or every one left out. The current run and the last closed one\n" +
			"(that diff compares the current run with) are always kept, as is everything of a task's current\n" +
			"run. Without --yes it only counts what would go and drops nothing (--dry-run says so explicitly).\n" +
			"It deletes in batches, each its own\n" +
			"statement, so it holds no long transaction: stopped, it can be run again. With --yes --detach it\n" +
			"enqueues the pruning of runs as a background job (cortexq jobs). --tables drops the\n" +
			"rows that grow with time instead: reaper passes (one every --reap-interval) and workers (one per\n" +
			"worker process: a restart adds one); serve does it every --prune-tables-every. See\n" +
			"docs/operations.md#retention.",
		Flags: append([]cli.Flag{
			corpusFlag("the corpus (or sandbox) whose runs to prune; empty: every one"),
			serviceFlag("the service whose runs to prune; empty: every one"),
			&cli.IntFlag{Name: "keep", Usage: "keep the last N runs of each corpus and service (at least 2)", EnvVars: envVars("PRUNE_KEEP")},
			&cli.StringFlag{Name: "before", Usage: "drop the runs that ended before this date (2006-01-02 UTC, or RFC 3339)", EnvVars: envVars("PRUNE_BEFORE")},
			&cli.BoolFlag{Name: "dry-run", Usage: "count what would be dropped, drop nothing (the default without --yes)", EnvVars: envVars("PRUNE_DRY_RUN")},
			yesFlag("PRUNE_YES"),
			detachFlag(),
			&cli.BoolFlag{Name: "tables", Usage: "also (or only, without --keep and --before) drop the reaper passes older than --reaper-passes-age and the workers not seen for --workers-age", EnvVars: envVars("PRUNE_TABLES")},
			&cli.DurationFlag{Name: "audit-age", Usage: "with --tables, also drop the audit rows and ended sessions older than this (0: kept; the audit log's owner only)", EnvVars: envVars("PRUNE_AUDIT_AGE")},
		}, append(tablesRetentionFlags(), formatFlags("prune")...)...),
		Action: runPrune,
	}
}

// parseDate reads --before: a UTC date or an RFC 3339 time.
func parseDate(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}

func runPrune(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if c.Bool("json") && c.Bool("csv") {
		return usagef(c, "give --json or --csv, not both")
	}
	if c.Bool("dry-run") && c.Bool(flagYes) {
		return usagef(c, "give --yes or --dry-run, not both")
	}
	opt := lease.PruneOptions{Keep: c.Int("keep"), DryRun: !c.Bool(flagYes)}
	noteOf(c).DryRun = opt.DryRun
	if s := c.String("before"); s != "" {
		t, err := parseDate(s)
		if err != nil {
			return usagef(c, "--before %q: want a date (2006-01-02) or an RFC 3339 time", s)
		}
		opt.Before = t
	}
	tablesOnly := c.Bool("tables") && opt.Keep == 0 && opt.Before.IsZero() && c.Int("keep") == 0
	if !tablesOnly && (c.Int("keep") < 0 || ((opt.Keep == 0) == opt.Before.IsZero()) || (opt.Keep != 0 && opt.Keep < lease.MinKeep)) {
		return usagef(c, "%v", lease.ErrPruneSelection)
	}
	if c.Bool("detach") && (c.Bool("tables") || !opt.DryRun) {
		return detachPrune(c, opt)
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	store := root.Lease(lease.Config{})
	if c.Bool("tables") {
		if err := pruneTablesOrPreview(c, store, root.Pool, opt.DryRun); err != nil || tablesOnly {
			return err
		}
	}
	scope, err := scopeOfNamed(c, root)
	if err != nil {
		return err
	}
	opt.CorpusID, opt.ServiceID = scope.CorpusID, scope.ServiceID
	scopes, err := store.PruneRuns(c.Context, opt)
	if err != nil {
		return err
	}
	verb := "dropped"
	if opt.DryRun {
		verb = "would drop"
	}
	t := table{
		Title: fmt.Sprintf("prune: %d corpus and service pairs; rows %s per table", len(scopes), verb),
		Header: []string{"corpus", "service", "kept_runs", "dropped_runs", "runs", "run_statuses", "run_diffs",
			"attempts", "task_message_logs"},
		JSON: map[string]any{"dry_run": opt.DryRun, "scopes": scopes},
	}
	if scopes == nil {
		t.JSON = map[string]any{"dry_run": opt.DryRun, "scopes": []lease.PruneScope{}}
	}
	ids := func(runs []int64) string {
		s := make([]string, len(runs))
		for i, r := range runs {
			s[i] = strconv.FormatInt(r, 10)
		}
		if len(s) > 6 && !c.Bool("csv") {
			s = append(s[:2], "…", s[len(s)-2], s[len(s)-1])
		}
		return strings.Join(s, " ")
	}
	for _, p := range scopes {
		t.Rows = append(t.Rows, []string{p.Corpus, p.Service, ids(p.KeptRuns), ids(p.DroppedRuns),
			num(c, int64(len(p.DroppedRuns))), num(c, p.RunStatuses), num(c, p.RunDiffs), num(c, p.Attempts), num(c, p.MessageLogs)})
	}
	if opt.DryRun {
		t.Note = "dry run: nothing dropped (add --yes to drop it)"
	}
	return t.print(c)
}

// detachPrune enqueues prune --yes --detach as a job: runs only (not --tables).
func detachPrune(c *cli.Context, opt lease.PruneOptions) error {
	if c.Bool("tables") {
		return usagef(c, "--detach prunes runs only: not with --tables")
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	return enqueueDetached(c, root, jobops.KindPrune, jobops.PruneArgs{Corpus: c.String(flagCorpus), Service: c.String(flagService),
		Keep: opt.Keep, Before: c.String("before")})
}

// pruneTablesOrPreview runs prune --tables, or without --yes names what it would drop: its rows
// are routine records, not counted first.
func pruneTablesOrPreview(c *cli.Context, store *lease.Store, pool *pgxpool.Pool, dryRun bool) error {
	if c.Duration("audit-age") < 0 {
		return usagef(c, "--audit-age: want 0 (keep the audit log) or a positive duration")
	}
	if !dryRun {
		if err := pruneTables(c, store); err != nil || c.Duration("audit-age") == 0 {
			return err
		}
		rows, sessions, err := audit.Prune(c.Context, pool, c.Duration("audit-age"))
		if err != nil {
			return fmt.Errorf("prune the audit log (its owner's to do): %w", err)
		}
		fmt.Fprintf(c.App.ErrWriter, "prune --tables: dropped %s audit rows and %s ended sessions older than %s\n",
			commas(rows), commas(sessions), c.Duration("audit-age"))
		return nil
	}
	kept := "the audit log kept"
	if d := c.Duration("audit-age"); d > 0 {
		kept = fmt.Sprintf("the audit rows and ended sessions older than %s", d)
	}
	fmt.Fprintf(c.App.Writer, "dry run: --tables would drop the reaper passes older than %s and the workers not seen for %s (%s); nothing changed (add --yes to do it)\n",
		c.Duration("reaper-passes-age"), c.Duration("workers-age"), kept)
	return nil
}

// tablesRetentionFlags are the ages prune --tables and serve keep reaper passes and workers for.
func tablesRetentionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "reaper-passes-age", Usage: "reaper passes older than this go (0: kept)", Value: lease.TablesRetentionDefault.ReaperPasses, EnvVars: envVars("REAPER_PASSES_AGE")},
		&cli.DurationFlag{Name: "workers-age", Usage: "workers not seen for this long go (0: kept)", Value: lease.TablesRetentionDefault.Workers, EnvVars: envVars("WORKERS_AGE")},
	}
}

// tablesRetention reads tablesRetentionFlags.
func tablesRetention(c *cli.Context) lease.TablesRetention {
	return lease.TablesRetention{ReaperPasses: c.Duration("reaper-passes-age"), Workers: c.Duration("workers-age")}
}

func pruneTables(c *cli.Context, store *lease.Store) error {
	if c.Duration("reaper-passes-age") < 0 || c.Duration("workers-age") < 0 {
		return usagef(c, "--reaper-passes-age and --workers-age: want 0 or a positive duration")
	}
	sum, err := store.PruneTables(c.Context, tablesRetention(c))
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") || c.Bool("csv") {
		w = c.App.ErrWriter // stdout is the runs' document
	}
	fmt.Fprintf(w, "prune --tables: dropped %s reaper passes (%s left) and %s workers (%s left); %s message kinds\n",
		commas(sum.ReaperPasses), commas(sum.ReaperPassesLeft), commas(sum.Workers), commas(sum.WorkersLeft), commas(sum.MessageKindsLeft))
	return nil
}
