package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/dispatch"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/reaper"
)

func whyCommand() *cli.Command {
	return &cli.Command{
		Name:  "why",
		Usage: "say why a corpus's tasks of a service are not progressing, with the evidence and the command that fixes each cause",
		Description: "Reads the database and names each cause it finds, most urgent first:\n" +
			"  replica_gone    a replica's heartbeats stopped without a clean stop (the database unreachable from it, or dead)\n" +
			"  finished        nothing TODO, dispatched or blocked\n" +
			"  paused          tasks blocked by cortexq pause\n" +
			"  priority        another corpus of the service with a higher priority has TODO tasks\n" +
			"  weight          its weight is under 5% of its priority's (the others with TODO tasks)\n" +
			"  no_workers      no worker asked for the service in the last minute\n" +
			"  workers_at_cap  every worker that asked holds --worker-cap unanswered leases\n" +
			"  no_reaper       no reaper pass for three --reap-interval: expired leases wait\n" +
			"  no_fold         changes wait for a report fold for three --fold-interval\n" +
			"  dead_letters    attempts of the last hour ended dead-lettered\n" +
			"Give --worker-cap, --reap-interval and --fold-interval as the replicas run. A worker is on\n" +
			"record once it leased a task: a new fleet that never leased shows as none. Nothing found\n" +
			"means the database shows nothing holding it back: see the runbook in\n" +
			"docs/operations.md#why-is-a-corpus-not-moving.",
		Flags: []cli.Flag{
			corpusFlag("the corpus (or sandbox)"),
			serviceFlag("the service"),
			&cli.IntFlag{Name: "worker-cap", Usage: "the replicas' --max-in-flight-per-worker", Value: dispatch.MaxInFlightPerWorkerDefault, EnvVars: envVars("MAX_IN_FLIGHT_PER_WORKER")},
			&cli.DurationFlag{Name: "reap-interval", Usage: "the replicas' --reap-interval", Value: reaper.IntervalDefault, EnvVars: envVars("REAP_INTERVAL")},
			&cli.DurationFlag{Name: "fold-interval", Usage: "the replicas' --fold-interval", Value: reaper.FoldIntervalDefault, EnvVars: envVars("FOLD_INTERVAL")},
			&cli.BoolFlag{Name: "json", Usage: "print the reasons as GET /api/v1/corpora/C/services/S/why answers them", EnvVars: envVars("WHY_JSON")},
		},
		Action: runWhy,
	}
}

func runWhy(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := required(c, flagCorpus, flagService); err != nil {
		return err
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	scope, err := scopeOfNamed(c, root)
	if err != nil {
		return err
	}
	reasons, err := root.Inspect.Why(c.Context, inspect.WhyOptions{Corpus: c.String(flagCorpus), Service: c.String(flagService),
		CorpusID: scope.CorpusID, ServiceID: scope.ServiceID, WorkerCap: c.Int("worker-cap"),
		ReapInterval: c.Duration("reap-interval"), FoldInterval: c.Duration("fold-interval")})
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		return printJSON(c, api.NewWhy(c.String(flagCorpus), c.String(flagService), reasons))
	}
	if len(reasons) == 0 {
		fmt.Fprintf(w, "corpus %s, service %s: nothing in the database holds it back (see docs/operations.md#why-is-a-corpus-not-moving)\n",
			printable(c.String(flagCorpus)), printable(c.String(flagService)))
		return nil
	}
	for _, r := range reasons {
		fmt.Fprintf(w, "%s: %s\n    fix: %s\n", r.Cause, printable(r.Evidence), printable(r.Fix))
	}
	return nil
}
