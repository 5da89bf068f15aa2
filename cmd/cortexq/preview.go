package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// Consequential mutations preview first (docs/audit-log.md#preview): without --yes they print what
// they would do and change nothing.

const flagYes = "yes"

// yesFlag lets a consequential mutation act. Its environment variable is the command's own
// (CORTEXQ_RERUN_YES, as migrate down's CORTEXQ_MIGRATE_DOWN_YES), never one for every command:
// a variable set once in a shell must not turn every preview into an action.
func yesFlag(envSuffix string) cli.Flag {
	return &cli.BoolFlag{Name: flagYes, Usage: "do it: without --yes the command prints what it would do and changes nothing",
		EnvVars: envVars(envSuffix)}
}

// confirm records a mutation's blast radius (tasks matched) for its audit row and, without --yes,
// prints the preview and reports false: the caller then returns without changing anything.
func confirm(c *cli.Context, tasks int64, preview string) bool {
	note := noteOf(c)
	note.matched(tasks)
	if c.Bool(flagYes) {
		return true
	}
	note.DryRun = true
	fmt.Fprintf(c.App.Writer, "dry run: %s; nothing changed (add --yes to do it)\n", preview)
	return false
}
