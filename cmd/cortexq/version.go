package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/internal/version"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print this cortexq's release, VCS revision and the schema version it expects",
		Description: "Prints one line: cortexq RELEASE (revision COMMIT, schema N). N is the newest migration this\n" +
			"binary holds: `cortexq migrate up` brings a database to it. `cortexq --version` prints the same.\n" +
			"What each release asks of an upgrade is in CHANGELOG.md; how replicas of two releases share a\n" +
			"database is in docs/operations.md (Upgrades).",
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, version.String())
			return nil
		},
	}
}

// setUpVersion makes `cortexq --version` print what `cortexq version` prints.
func setUpVersion(app *cli.App) {
	app.Version = version.Release()
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the release, VCS revision and schema version, then exit"}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, version.String()) }
}

// logVersion says at start which cortexq runs, for the logs of a rolling upgrade.
func logVersion(logger *slog.Logger, what string) {
	logger.Info("starting "+what, "version", version.Release(), "revision", version.Revision(), "schema", version.Schema())
}

// buildInfo is the cortexq_build_info gauge: 1, labelled with this build's release, revision and
// schema, so that a dashboard shows which replicas run which release during an upgrade.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cortexq_build_info",
		Help: "Always 1; the labels say this replica's release, VCS revision and the schema version it expects.",
		ConstLabels: prometheus.Labels{"version": version.Release(), "revision": version.Revision(),
			"schema": fmt.Sprint(version.Schema())},
	})
	g.Set(1)
	return g
}
