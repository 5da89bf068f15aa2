package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
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
			"category and what (of that severity, when --severity is given: info for no_problem). Without any,\n" +
			"every task of the corpus and service is rerun.",
		Flags: []cli.Flag{
			corpusFlag("corpus of the tasks"),
			serviceFlag("service of the tasks"),
			&cli.StringFlag{
				Name:    "severity",
				Usage:   "rerun only tasks with this status: no_problem, warning, error, fatal or invalid",
				EnvVars: envVars("RERUN_SEVERITY"),
			},
			&cli.StringFlag{
				Name:    "category",
				Usage:   "rerun only tasks with a message of this category",
				EnvVars: envVars("RERUN_CATEGORY"),
			},
			&cli.StringFlag{
				Name:    "what",
				Usage:   "rerun only tasks with a message of this what",
				EnvVars: envVars("RERUN_WHAT"),
			},
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
		},
		Action: runRerun,
	}
}

// severities maps --severity to the task status it selects and the message severity it filters.
var severities = map[string]struct {
	status  queue.Status
	message queue.Severity
}{
	"no_problem": {queue.StatusNoProblem, queue.SeverityInfo},
	"warning":    {queue.StatusWarning, queue.SeverityWarning},
	"error":      {queue.StatusError, queue.SeverityError},
	"fatal":      {queue.StatusFatal, queue.SeverityFatal},
	"invalid":    {queue.StatusInvalid, queue.SeverityInvalid},
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
	scope := lease.RerunScope{
		Category: c.String("category"),
		What:     c.String("what"),
		Note:     c.String("note"),
	}
	if sev := strings.ToLower(c.String("severity")); sev != "" {
		s, ok := severities[sev]
		if !ok {
			names := make([]string, 0, len(severities))
			for n := range severities {
				names = append(names, n)
			}
			sort.Strings(names)
			return usagef(c, "--severity %q: want one of %s", sev, strings.Join(names, ", "))
		}
		scope.Statuses = []queue.Status{s.status}
		if scope.Category != "" || scope.What != "" {
			scope.Severity = string(s.message)
		}
	}
	store, done, err := openStore(c, lease.Config{LateResultWindow: c.Duration("late-result-window")})
	if err != nil {
		return err
	}
	defer done()
	ids, err := scopeOf(c, store)
	if err != nil {
		return err
	}
	scope.CorpusID, scope.ServiceID = ids.CorpusID, ids.ServiceID
	sum, err := store.Rerun(c.Context, scope)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "corpus %s, service %s: %d tasks back to TODO in a new run; %d leases of old runs settled (their results will be stale); %d reservations of old runs dropped\n",
		c.String(flagCorpus), c.String(flagService), sum.Tasks, sum.Settled, sum.Unreserved)
	return nil
}
