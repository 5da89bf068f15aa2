package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/lease"
)

func rerunCommand() *cli.Command {
	return &cli.Command{
		Name:  "rerun",
		Usage: "send the tasks of a corpus and service (or a slice of them) back to TODO in a new run",
		Description: "Every selected task goes back to TODO with its run number increased; its messages go, and a\n" +
			"result still on its way from a worker of the old run is dropped as stale. The runs table keeps\n" +
			"the old run's tallies.\n" +
			"\n" +
			"--severity selects the tasks whose status is that severity (no_problem, warning, error, fatal,\n" +
			"invalid). --category and --what select the tasks with a message of the current run with that\n" +
			"category and what (of that severity, when --severity is given: info for no_problem). With\n" +
			"--severity, --category no_messages selects the tasks of that status with no message of its severity\n" +
			"(as cortexq report lists them). Without any, every task of the corpus and service is rerun.\n" +
			"cortexq report prints the rerun line of each slice it shows.\n" +
			"\n" +
			"Without --yes it changes nothing: it prints the number of tasks it would send back and the run it\n" +
			"would close. With --yes --detach it enqueues the rerun as a background job (cortexq jobs; a\n" +
			"--severity slice or the whole corpus and service). Every call appends a row to the audit log\n" +
			"(cortexq audit).",
		Flags: append(append([]cli.Flag{
			corpusFlag("corpus of the tasks"),
			serviceFlag("service of the tasks"),
		}, selectionFlags("rerun")...),
			&cli.StringFlag{
				Name:    "note",
				Usage:   "note kept with the run history",
				EnvVars: envVars("RERUN_NOTE"),
			},
			&cli.DurationFlag{
				Name:    "late-result-window",
				Usage:   "how long leases of the old run still out are held, so their late results are told apart as stale",
				Value:   lease.LateResultWindowDefault,
				EnvVars: envVars("LATE_RESULT_WINDOW"),
			},
			yesFlag("RERUN_YES"),
			detachFlag(),
		),
		Action: runRerun,
	}
}

func runRerun(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := required(c, flagCorpus, flagService); err != nil {
		return err
	}
	if c.Duration("late-result-window") <= 0 {
		return usagef(c, "--late-result-window: want a positive duration")
	}
	scope, err := selectionOf(c)
	if err != nil {
		return err
	}
	scope.Note = c.String("note")
	if c.Bool("detach") && (c.String("category") != "" || c.String("what") != "" || c.IsSet("late-result-window")) {
		return usagef(c, "--detach takes a --severity slice or none: not --category, --what or --late-result-window")
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	ids, err := scopeOfNamed(c, root)
	if err != nil {
		return err
	}
	scope.CorpusID, scope.ServiceID = ids.CorpusID, ids.ServiceID
	noteOf(c).Target = "corpus " + c.String(flagCorpus) + ", service " + c.String(flagService)
	store := root.Lease(lease.Config{LateResultWindow: c.Duration("late-result-window")})
	pre, err := store.PreviewRerun(c.Context, scope)
	if err != nil {
		return err
	}
	run := "a new run would open"
	if pre.OpenRun != 0 {
		run = fmt.Sprintf("run %d would close and a new one open", pre.OpenRun)
	}
	if !confirm(c, pre.Tasks, fmt.Sprintf("corpus %s, service %s: %d tasks would go back to TODO (%s)",
		c.String(flagCorpus), c.String(flagService), pre.Tasks, run)) {
		return nil
	}
	if c.Bool("detach") {
		args := jobops.RerunArgs{Corpus: c.String(flagCorpus), Service: c.String(flagService), Note: scope.Note}
		if sev := c.String("severity"); sev != "" {
			args.Severities = []string{sev}
		}
		return enqueueDetached(c, root, jobops.KindRerun, args)
	}
	sum, err := store.Rerun(c.Context, scope)
	if err != nil {
		return err
	}
	noteOf(c).matched(int64(sum.Tasks))
	fmt.Fprintf(c.App.Writer, "corpus %s, service %s: %d tasks back to TODO in a new run; %d leases of old runs settled (their results will be stale); %d reservations of old runs dropped\n",
		c.String(flagCorpus), c.String(flagService), sum.Tasks, sum.Settled, sum.Unreserved)
	return nil
}
