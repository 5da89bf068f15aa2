package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/catalog"
)

func sweepCommand() *cli.Command {
	return &cli.Command{
		Name:  "sweep",
		Usage: "remove the temp and kept-aside archives that crashed replicas left in the corpora",
		Description: "A replica killed mid-claim leaves .<archive>.tmp-* and .<archive>.prev-* files beside result\n" +
			"archives. Every replica sweeps its own earlier processes' at start-up (and anyone's older\n" +
			"than serve's --sweep-orphan-age); this command sweeps all corpora now: files older than\n" +
			"--older-than, and with --replica all the files of that replica, which must not be running.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "older-than", Usage: "remove any replica's leftovers last modified longer ago than this (far above any claim's duration)", Value: archive.SweepOrphanAgeDefault, EnvVars: envVars("SWEEP_OLDER_THAN")},
			&cli.StringFlag{Name: "replica", Usage: "also remove every leftover of this replica, whatever its age: only for a replica that is not running", EnvVars: envVars("SWEEP_REPLICA")},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be removed, remove nothing", EnvVars: envVars("SWEEP_DRY_RUN")},
		},
		Action: runSweep,
	}
}

func runSweep(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if c.Duration("older-than") <= 0 && c.String("replica") == "" {
		return usagef(c, "--older-than %s: want a positive duration (or --replica)", c.Duration("older-than"))
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	cfg := archive.SweepConfig{Replica: c.String("replica"), OrphanAge: max(c.Duration("older-than"), 0), DryRun: c.Bool("dry-run")}
	verb := "removed"
	if cfg.DryRun {
		verb = "would remove"
	}
	return sweepCorpora(c.Context, root.Catalog, cfg, slog.Default(), func(base, rel string) {
		fmt.Fprintf(c.App.Writer, "%s %s\n", verb, filepath.Join(base, rel))
	})
}

// sweepCorpora runs dispatch.Sweep on the path of every corpus (those beneath another's once),
// logging what each did, and calls removed, if not nil, for each file removed.
func sweepCorpora(ctx context.Context, catalog *catalog.Catalog, cfg archive.SweepConfig, logger *slog.Logger, removed func(base, rel string)) error {
	paths, err := catalog.CorpusPaths(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	var errs int
	for i, base := range paths {
		if i > 0 && beneathAny(base, paths[:i]) {
			continue // swept with the corpus it lies in
		}
		start := time.Now()
		st, err := archive.Sweep(ctx, base, cfg)
		for _, rel := range st.Removed {
			if removed != nil {
				removed(base, rel)
			}
		}
		attrs := []any{"path", base, "entries", st.Visited, "removed", len(st.Removed), "failed", st.Failed,
			"took", time.Since(start).Round(time.Millisecond)}
		if err != nil {
			errs++
			logger.Warn("sweep of leftover temp archives stopped", append(attrs, "error", err)...)
			continue
		}
		if len(st.Removed) > 0 || st.Failed > 0 {
			logger.Info("swept leftover temp archives", attrs...)
		} else {
			logger.Debug("swept leftover temp archives", attrs...)
		}
	}
	if errs > 0 {
		return fmt.Errorf("sweep: %d of %d corpus paths not swept to the end", errs, len(paths))
	}
	return nil
}

// beneathAny reports whether path is one of dirs or lies beneath one (dirs sorted, as
// CorpusPaths returns them, so a parent comes before what lies beneath it).
func beneathAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}
