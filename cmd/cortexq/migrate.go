package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/migrations"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "apply, roll back or list the schema migrations",
		Subcommands: []*cli.Command{
			{
				Name:  "up",
				Usage: "apply every pending migration",
				Description: "With --wait, a database that does not answer yet (a server still starting) is asked again\n" +
					"every 1 s, a log line per attempt, until it answers or the wait is over.\n\n" +
					"Safe against a live database while replicas dispatch (docs/operations.md, Upgrades): every\n" +
					"statement waits at most --lock-timeout for a lock (PostgreSQL's lock_timeout), so the\n" +
					"replicas' statements never queue behind it for longer; a migration that times out is rolled\n" +
					"back, logged, and tried again after a pause (1 s, 2 s, ... up to 10 s), at most --lock-retries times.",
				Flags: []cli.Flag{
					&cli.DurationFlag{Name: "wait", Usage: "how long to keep retrying a database that does not answer yet (0: one try)",
						EnvVars: envVars("MIGRATE_WAIT")},
					&cli.DurationFlag{Name: "lock-timeout", Usage: "how long a migration's statement may wait for a lock before the migration is rolled back and retried (0: wait as long as it takes)",
						Value: migrateLockTimeoutDefault, EnvVars: envVars("MIGRATE_LOCK_TIMEOUT")},
					&cli.IntFlag{Name: "lock-retries", Usage: "how many times a migration that timed out waiting for a lock is tried again",
						Value: migrateLockRetriesDefault, EnvVars: envVars("MIGRATE_LOCK_RETRIES")},
				},
				Action: migrateUp,
			},
			{
				Name:      "down",
				Usage:     "roll back the newest migration, or every migration after VERSION (0: all of them)",
				ArgsUsage: "[VERSION]",
				Description: "Rolling back 00004 drops the worker keys (the CURVE allow-list), and rolling back 00001\n" +
					"drops every cortexq table: tasks, their history and results' records. While those tables hold\n" +
					"rows, migrate down refuses (and rolls nothing back) unless --yes is given.",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "yes", Usage: "roll back even migrations whose tables hold rows (their data is lost)",
						EnvVars: envVars("MIGRATE_DOWN_YES")},
				},
				Action: migrateDown,
			},
			{
				Name:   "status",
				Usage:  "list the migrations and whether each is applied",
				Action: migrateStatus,
			},
		},
	}
}

// Defaults of migrate up's lock flags: a replica's statement waits at most about half a second
// behind a migration's (docs/operations.md, "Upgrades").
const (
	migrateLockTimeoutDefault = 500 * time.Millisecond
	migrateLockRetriesDefault = 30
)

// withProvider runs fn with a goose provider on the database; with migrate up's --lock-timeout,
// every connection has that lock_timeout (openMigrationsDB).
func withProvider(c *cli.Context, fn func(ctx context.Context, p *goose.Provider, db *sql.DB) error) error {
	dsn, err := databaseURL(c)
	if err != nil {
		return err
	}
	db, err := openMigrationsDB(c, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := pingWait(c.Context, db, c.Duration("wait")); err != nil {
		return err
	}
	p, err := migrations.NewProvider(db)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return fn(c.Context, p, db)
}

// pingWait checks that db answers, asking again every second (a log line per failed attempt)
// until wait is over; wait 0 is one try.
func pingWait(ctx context.Context, db *sql.DB, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			if attempt > 1 {
				slog.Info("database answers", "attempt", attempt)
			}
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			if attempt > 1 {
				slog.Warn("database not answering; giving up", "attempts", attempt, "wait", wait)
			}
			return fmt.Errorf("connect to the database: %w", err)
		}
		slog.Warn("database not answering yet; retrying", "attempt", attempt, "error", err, "wait_left", left.Round(time.Second))
		select {
		case <-time.After(min(time.Second, left)):
		case <-ctx.Done():
			return fmt.Errorf("connect to the database: %w", ctx.Err())
		}
	}
}

func printResults(c *cli.Context, verb string, results []*goose.MigrationResult) {
	if len(results) == 0 {
		fmt.Fprintf(c.App.Writer, "nothing to %s\n", verb)
		return
	}
	for _, r := range results {
		fmt.Fprintf(c.App.Writer, "%s %05d %s (%s)\n", r.Direction, r.Source.Version, migrationName(r.Source),
			r.Duration.Round(time.Millisecond))
	}
}

func migrationName(s *goose.Source) string {
	if s.Path != "" {
		return s.Path
	}
	return "go migration"
}

func migrateUp(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if c.Int("lock-retries") < 0 {
		return usagef(c, "--lock-retries %d: want 0 or more", c.Int("lock-retries"))
	}
	return withProvider(c, func(ctx context.Context, p *goose.Provider, db *sql.DB) error {
		return upRetrying(c, p)
	})
}

// upRetrying applies the pending migrations; one rolled back because a statement waited past
// --lock-timeout for a lock is tried again, up to --lock-retries times, after a pause that grows.
func upRetrying(c *cli.Context, p *goose.Provider) error {
	lockTimeout, retries := c.Duration("lock-timeout"), c.Int("lock-retries")
	if lockTimeout > 0 {
		slog.Info("migrate up: each statement waits at most lock_timeout for a lock; a migration that times out is rolled back and tried again",
			"lock_timeout", lockTimeout, "lock_retries", retries)
	}
	applied := 0
	for attempt := 1; ; attempt++ {
		results, err := p.Up(c.Context)
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			results = partial.Applied
		}
		if len(results) > 0 {
			printResults(c, "apply", results)
		}
		applied += len(results)
		if err == nil {
			if applied == 0 {
				printResults(c, "apply", nil)
			}
			return nil
		}
		if !migrations.IsLockTimeout(err) || attempt > retries {
			return fmt.Errorf("migrate up: %w", err)
		}
		pause := time.Duration(min(attempt, 10)) * time.Second
		failed := int64(0)
		if partial != nil {
			failed = partial.Failed.Source.Version
		}
		slog.Warn("migrate up: a statement waited past lock_timeout for a lock; the migration was rolled back and will be tried again",
			"migration", fmt.Sprintf("%05d", failed), "attempt", attempt, "retries", retries, "retry_in", pause, "error", oneLine(err.Error()))
		select {
		case <-time.After(pause):
		case <-c.Context.Done():
			return fmt.Errorf("migrate up: %w", c.Context.Err())
		}
	}
}

func migrateDown(c *cli.Context) error {
	args, err := positional(c)
	if err != nil {
		return err
	}
	to := int64(-1)
	switch len(args) {
	case 0:
	case 1:
		v, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || v < 0 {
			return usagef(c, "VERSION %q: want a migration version, 0 for none", args[0])
		}
		to = v
	default:
		return usagef(c, "want at most one VERSION")
	}
	return withProvider(c, func(ctx context.Context, p *goose.Provider, db *sql.DB) error {
		if !c.Bool("yes") {
			if err := refuseDataLoss(ctx, p, db, to); err != nil {
				return err
			}
		}
		if to < 0 {
			r, err := p.Down(ctx)
			if errors.Is(err, goose.ErrNoNextVersion) {
				printResults(c, "roll back", nil)
				return nil
			}
			if r != nil {
				printResults(c, "roll back", []*goose.MigrationResult{r})
			}
			if err != nil {
				return fmt.Errorf("migrate down: %w", err)
			}
			return nil
		}
		results, err := p.DownTo(ctx, to)
		printResults(c, "roll back", results)
		if err != nil {
			return fmt.Errorf("migrate down to %d: %w", to, err)
		}
		return nil
	})
}

// dropsData lists, for each migration whose rollback drops tables of records, those tables.
var dropsData = map[int64][]string{
	1: {"services", "corpora", "tasks", "dispatch", "attempts", "task_messages", "runs", "workers"},
	4: {"worker_keys"},
}

// refuseDataLoss fails when rolling back to version to (-1: the newest migration only) would
// drop a table that holds rows.
func refuseDataLoss(ctx context.Context, p *goose.Provider, db *sql.DB, to int64) error {
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	if to < 0 {
		to = current - 1
	}
	var lost []string
	for v := current; v > to && v > 0; v-- {
		for _, table := range dropsData[v] {
			var n int64
			err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n)
			if err != nil {
				return fmt.Errorf("migrate down: count the rows of %s: %w", table, err)
			}
			if n > 0 {
				lost = append(lost, fmt.Sprintf("%s (%d rows, dropped by rolling back %05d)", table, n, v))
			}
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("migrate down: nothing rolled back: it would drop %s; give --yes to drop them",
			strings.Join(lost, ", "))
	}
	return nil
}

func migrateStatus(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	return withProvider(c, func(ctx context.Context, p *goose.Provider, db *sql.DB) error {
		st, err := p.Status(ctx)
		if err != nil {
			return fmt.Errorf("migrate status: %w", err)
		}
		w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "VERSION\tSTATE\tAPPLIED AT\tMIGRATION")
		for _, s := range st {
			at := "-"
			if !s.AppliedAt.IsZero() {
				at = zoned(s.AppliedAt, time.DateTime)
			}
			fmt.Fprintf(w, "%05d\t%s\t%s\t%s\n", s.Source.Version, s.State, at, migrationName(s.Source))
		}
		return w.Flush()
	})
}
