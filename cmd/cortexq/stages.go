package main

// cortexq runs --stages and --slowest: where a run's time went (docs/stages.md).

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/reports"
)

// stageFlags are runs' flags for the stage summary.
func stageFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "stages", Usage: "print where the run's time went instead: each stage's p50/p95/p99, sum, load and share of the busy time, papers per second and the bottleneck (docs/stages.md); without --corpus, the service's over all corpora",
			EnvVars: envVars("RUNS_STAGES")},
		&cli.IntFlag{Name: "slowest", Usage: "with --stages, also list the N tasks slowest from hand-out to commit, with their stages",
			EnvVars: envVars("RUNS_SLOWEST")},
		&cli.Int64Flag{Name: "run", Usage: "with --stages, the run's id (cortexq runs); 0: the current run of --corpus and --service",
			EnvVars: envVars("RUNS_RUN")},
	}
}

func runStages(c *cli.Context) error {
	if err := required(c, flagService); err != nil {
		return err
	}
	if c.Int("slowest") < 0 {
		return usagef(c, "--slowest %d: want 0 or more", c.Int("slowest"))
	}
	root, done, err := openBase(c, reports.TuneReportPool)
	if err != nil {
		return err
	}
	defer done()
	sc, run, title, err := stageScopeOf(c, root)
	if err != nil {
		return err
	}
	tasks, truncated, err := root.Reports.StageTasks(c.Context, sc)
	if err != nil {
		return err
	}
	// The API's answer (GET .../stages): one shape for the CLI's --json and the API.
	out := api.Stages{Corpus: c.String(flagCorpus), Service: c.String(flagService), Run: run,
		Summary: reports.SummarizeStages(tasks), Slowest: []reports.TaskStages{}}
	out.Summary.Truncated = truncated
	if n := c.Int("slowest"); n > 0 {
		out.Slowest = reports.SlowestTasks(tasks, n)
	}
	t := table{Title: title, Header: reports.StageHeader, Rows: reports.StageRows(out.Summary), JSON: out,
		Note: reports.StageNote(out.Summary)}
	if err := t.print(c); err != nil || c.Bool("json") || len(out.Slowest) == 0 {
		return err
	}
	fmt.Fprintln(c.App.Writer)
	return table{Title: fmt.Sprintf("the %d slowest tasks, hand-out to commit", len(out.Slowest)),
		Header: reports.SlowestHeader, Rows: reports.SlowestRows(out.Slowest)}.print(c)
}

// stageScopeOf reads the scope of runs --stages: a run of a corpus and service (--run, else the
// current one), or a service over all corpora (no --corpus).
func stageScopeOf(c *cli.Context, root *base.Base) (reports.StageScope, int64, string, error) {
	service := c.String(flagService)
	if c.String(flagCorpus) == "" {
		if c.Int64("run") != 0 {
			return reports.StageScope{}, 0, "", usagef(c, "--run needs --corpus")
		}
		svc, err := root.Catalog.Service(c.Context, service)
		if errors.Is(err, queue.ErrNotFound) {
			return reports.StageScope{}, 0, "", usagef(c, "service %q: %v", service, err)
		}
		if err != nil {
			return reports.StageScope{}, 0, "", err
		}
		return reports.StageScope{ServiceID: svc.ID}, 0, fmt.Sprintf("service %s, all corpora: stages", service), nil
	}
	scope, err := scopeOfNamed(c, root)
	if err != nil {
		return reports.StageScope{}, 0, "", err
	}
	run := c.Int64("run")
	if run == 0 {
		runs, err := root.Reports.Runs(c.Context, scope)
		if err != nil {
			return reports.StageScope{}, 0, "", err
		}
		if len(runs) == 0 {
			return reports.StageScope{}, 0, "", usagef(c, "no run of corpus %s and service %s", c.String(flagCorpus), service)
		}
		run = runs[len(runs)-1].ID
	}
	sc, err := root.Reports.RunStageScope(c.Context, run)
	if errors.Is(err, queue.ErrNotFound) || err == nil && (sc.CorpusID != scope.CorpusID || sc.ServiceID != scope.ServiceID) {
		return sc, 0, "", usagef(c, "--run %d: not a run of corpus %s and service %s", run, c.String(flagCorpus), service)
	}
	if err != nil {
		return sc, 0, "", err
	}
	return sc, run, fmt.Sprintf("corpus %s, service %s, run %d (from %s): stages", c.String(flagCorpus), service, run,
		zoned(sc.Since, time.DateTime)), nil
}

// printAttemptStages writes the stages of the attempts that recorded them (docs/stages.md).
func printAttemptStages(out io.Writer, attempts []inspect.Attempt) {
	for _, a := range attempts {
		if a.Stages != nil {
			fmt.Fprintf(out, "stages of run %d attempt %d: %s\n", a.Run, a.Attempt, a.Stages)
		}
	}
}
