package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/reports"
)

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "list the runs of a corpus and service, with their tallies",
		Description: "One line per run, oldest first: its id (for cortexq diff --from/--to), when it started and ended,\n" +
			"the note its rerun gave, and its tasks by status with their shares (of the tasks not Invalid, as\n" +
			"cortexq report counts them). A closed run shows the tallies it ended with; the current one, its\n" +
			"tallies now. A rerun closes the current run and opens the next.\n" +
			"\n" +
			"--stages prints where a run's time went instead (docs/stages.md): for each stage of its accepted\n" +
			"attempts (todo, reserved, source, worker, transfer, unpack, convert, pack, write, claim_wait, claim)\n" +
			"the tasks that recorded it, p50/p95/p99, sum, load (sum over the wall clock) and share of the busy\n" +
			"time; then papers per second and the bottleneck. --slowest N lists the N tasks slowest from hand-out\n" +
			"to commit with their stages. Without --corpus: the service's attempts over all corpora.",
		Flags: append(append([]cli.Flag{
			corpusFlag("corpus (or sandbox) whose runs to list"),
			serviceFlag("service whose runs to list"),
		}, formatFlags("runs")...), stageFlags()...),
		Action: runRuns,
	}
}

func runRuns(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if c.Bool("stages") {
		return runStages(c)
	}
	if c.Int("slowest") != 0 || c.Int64("run") != 0 {
		return usagef(c, "--slowest and --run go with --stages")
	}
	if err := required(c, flagCorpus, flagService); err != nil {
		return err
	}
	if c.Bool("json") && c.Bool("csv") {
		return usagef(c, "give --json or --csv, not both")
	}
	root, done, err := openBase(c, reports.TuneReportPool)
	if err != nil {
		return err
	}
	defer done()
	scope, err := scopeOfNamed(c, root)
	if err != nil {
		return err
	}
	runs, err := root.Reports.Runs(c.Context, scope)
	if err != nil {
		return err
	}
	t := table{
		Title: fmt.Sprintf("corpus %s, service %s: %d runs", c.String(flagCorpus), c.String(flagService), len(runs)),
		Header: []string{"run", "started", "ended", "tasks", "no_problem", "warning", "error", "fatal", "invalid",
			"todo", "in_flight", "blocked", "note"},
		JSON: api.NewRuns(c.String(flagCorpus), c.String(flagService), runs),
	}
	raw := c.Bool("csv")
	for _, r := range runs {
		total := r.Tasks - r.Invalid
		cell := func(n int64) string {
			if raw {
				return strconv.FormatInt(n, 10)
			}
			return fmt.Sprintf("%s (%s)", commas(n), percent(n, total))
		}
		ended := "current"
		if r.EndedAt != nil {
			ended = zoned(*r.EndedAt, time.DateTime)
		}
		tasks := commas(r.Tasks)
		if raw {
			tasks = strconv.FormatInt(r.Tasks, 10)
		}
		invalid := commas(r.Invalid)
		if raw {
			invalid = strconv.FormatInt(r.Invalid, 10)
		}
		t.Rows = append(t.Rows, []string{strconv.FormatInt(r.ID, 10), zoned(r.StartedAt, time.DateTime), ended, tasks,
			cell(r.NoProblem), cell(r.Warning), cell(r.Error), cell(r.Fatal), invalid,
			cell(r.TODO), cell(r.InFlight()), cell(r.Blocked), runNote(r)})
	}
	return t.print(c)
}

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:  "diff",
		Usage: "compare the task statuses of two runs of a corpus and service",
		Description: "The status transition matrix between two runs (ids from cortexq runs): for each status in the\n" +
			"--from run and status in the --to run, the tasks that went from one to the other (error → no_problem\n" +
			"1,234). --to defaults to the current run, --from to the run before --to. A task not yet imported in\n" +
			"the --from run counts as from \"new\". --from-status and --to-status list the tasks of one cell, by\n" +
			"id, paged with --limit and --offset. Statuses: no_problem, warning, error, fatal, invalid, todo,\n" +
			"in_flight, blocked (and new for --from-status).\n" +
			"\n" +
			"A closed run's statuses are those its tasks had when the rerun that closed it began. The matrix of\n" +
			"two closed runs is counted on first use and kept. That of the last closed run and the current one\n" +
			"is kept by the replicas' report fold (cortexq serve --fold-interval), as the report's category and\n" +
			"what levels are: the line under it says how old the fold is (the todo, in_flight and blocked\n" +
			"counts may be up to a few more folds older); --fold folds first. Other pairs are counted on the spot.",
		Flags: append([]cli.Flag{
			corpusFlag("corpus (or sandbox) whose runs to compare"),
			serviceFlag("service whose runs to compare"),
			&cli.Int64Flag{Name: "from", Usage: "the earlier run's id; 0: the run before --to", EnvVars: envVars("DIFF_FROM")},
			&cli.Int64Flag{Name: "to", Usage: "the later run's id; 0: the current run", EnvVars: envVars("DIFF_TO")},
			&cli.StringFlag{Name: "from-status", Usage: "with --to-status, list the tasks that had this status in --from",
				EnvVars: envVars("DIFF_FROM_STATUS")},
			&cli.StringFlag{Name: "to-status", Usage: "with --from-status, list the tasks that have this status in --to",
				EnvVars: envVars("DIFF_TO_STATUS")},
			&cli.BoolFlag{Name: "fold", Usage: "fold the changes noted since the last fold first, and recount the kept matrix (as cortexq fold; needs write access)", EnvVars: envVars("DIFF_FOLD")},
		}, pageFlags("diff")...),
		Action: runDiff,
	}
}

// parseStatus reads a status name of the report (new: none, when allowed).
func parseStatus(name string, allowNew bool) (*queue.Status, bool) {
	name = strings.ToLower(name)
	if name == "new" && allowNew {
		return nil, true
	}
	if name == "dispatched" {
		name = "in_flight"
	}
	for _, st := range reportStatuses {
		if statusName(st) == name {
			return &st, true
		}
	}
	return nil, false
}

func runDiff(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := required(c, flagCorpus, flagService); err != nil {
		return err
	}
	limit, offset, err := pageOf(c)
	if err != nil {
		return err
	}
	fromName, toName := c.String("from-status"), c.String("to-status")
	if (fromName == "") != (toName == "") {
		return usagef(c, "give both --from-status and --to-status (one cell), or neither (the matrix)")
	}
	names := "no_problem, warning, error, fatal, invalid, todo, in_flight, blocked"
	fromStatus, ok := parseStatus(fromName, true)
	if fromName != "" && !ok {
		return usagef(c, "--from-status %q: want one of %s or new", fromName, names)
	}
	toStatus, ok := parseStatus(toName, false)
	if toName != "" && !ok {
		return usagef(c, "--to-status %q: want one of %s", toName, names)
	}
	root, done, err := openBase(c, reports.TuneReportPool)
	if err != nil {
		return err
	}
	defer done()
	scope, err := scopeOfNamed(c, root)
	if err != nil {
		return err
	}
	runs, err := root.Reports.Runs(c.Context, scope)
	if err != nil {
		return err
	}
	d, label, err := pickRuns(c, runs)
	if err != nil {
		return err
	}
	d.Scope = scope
	corpus, service := c.String(flagCorpus), c.String(flagService)
	if toStatus != nil {
		tasks, err := root.Reports.DiffCellTasks(c.Context, d, fromStatus, *toStatus, limit, offset)
		if err != nil {
			return err
		}
		t := table{
			Title:  fmt.Sprintf("corpus %s, service %s: %s, tasks %s → %s", corpus, service, label, strings.ToLower(fromName), statusName(*toStatus)),
			Header: []string{"task_id", "entry"},
		}
		for _, x := range tasks {
			t.Rows = append(t.Rows, []string{strconv.FormatInt(x.TaskID, 10), x.Entry})
		}
		js := api.DiffTasks{Corpus: corpus, Service: service, From: d.From, To: d.To, FromStatus: strings.ToLower(fromName),
			ToStatus: statusName(*toStatus), Offset: offset, Limit: limit, Tasks: make([]api.DiffTask, 0, len(tasks))}
		for _, x := range tasks {
			js.Tasks = append(js.Tasks, api.DiffTask(x))
		}
		t.JSON = js
		return t.print(c)
	}
	return diffMatrix(c, root, d, label)
}

// diffMatrix prints the matrix of a diff: how many tasks went from each status to each other.
func diffMatrix(c *cli.Context, root *base.Base, d reports.DiffRuns, label string) error {
	corpus, service := c.String(flagCorpus), c.String(flagService)
	if c.Bool("fold") {
		if err := foldAll(c, root); err != nil {
			return err
		}
	}
	cells, swept, err := root.Reports.DiffMatrixSwept(c.Context, d)
	if err != nil {
		return err
	}
	t := table{
		Title:  fmt.Sprintf("corpus %s, service %s: %s", corpus, service, label),
		Header: []string{"from", "", "to", "tasks"},
		Next:   "the tasks of a cell: " + commandLine("diff", flagCorpus, corpus, flagService, service, "from", strconv.FormatInt(d.From, 10), "to", nonZero(d.To)) + " --from-status S --to-status S",
	}
	var fold reports.FoldState
	if swept != nil {
		if fold, err = root.Reports.ReportFoldState(c.Context); err != nil {
			return err
		}
		t.Note = foldAge(fold) + "; todo, in_flight and blocked as of " + zoned(*swept, "15:04:05")
	}
	for _, x := range cells {
		from := "new"
		if x.From != nil {
			from = statusName(*x.From)
		}
		if c.Bool("csv") {
			t.Header = []string{"from", "to", "tasks"}
			t.Rows = append(t.Rows, []string{from, statusName(x.To), strconv.FormatInt(x.Tasks, 10)})
		} else {
			t.Rows = append(t.Rows, []string{from, "→", statusName(x.To), commas(x.Tasks)})
		}
	}
	t.JSON = api.NewDiffSwept(corpus, service, d, cells, swept, fold)
	return t.print(c)
}

func nonZero(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// pickRuns resolves --from and --to among the runs (oldest first) of the corpus and service.
// The current run is To 0.
func pickRuns(c *cli.Context, runs []reports.Run) (reports.DiffRuns, string, error) {
	from, to := c.Int64("from"), c.Int64("to")
	find := func(id int64) int {
		for i, r := range runs {
			if r.ID == id {
				return i
			}
		}
		return -1
	}
	toIdx := len(runs) - 1
	if to != 0 {
		if toIdx = find(to); toIdx < 0 {
			return reports.DiffRuns{}, "", usagef(c, "--to %d: no such run of the corpus and service (see cortexq runs)", to)
		}
	}
	if toIdx < 0 {
		return reports.DiffRuns{}, "", usagef(c, "the corpus and service have no runs")
	}
	fromIdx := toIdx - 1
	if from != 0 {
		if fromIdx = find(from); fromIdx < 0 {
			return reports.DiffRuns{}, "", usagef(c, "--from %d: no such run of the corpus and service (see cortexq runs)", from)
		}
		if fromIdx >= toIdx {
			return reports.DiffRuns{}, "", usagef(c, "--from %d: want a run before run %d", from, runs[toIdx].ID)
		}
	}
	if fromIdx < 0 {
		return reports.DiffRuns{}, "", usagef(c, "run %d is the first run of the corpus and service: nothing to compare it with", runs[toIdx].ID)
	}
	d := reports.DiffRuns{From: runs[fromIdx].ID}
	label := fmt.Sprintf("run %d → run %d", runs[fromIdx].ID, runs[toIdx].ID)
	if runs[toIdx].EndedAt == nil {
		label += " (current)"
	} else {
		d.To = runs[toIdx].ID
	}
	if runs[fromIdx].EndedAt == nil {
		return reports.DiffRuns{}, "", usagef(c, "--from %d: the run is not closed", runs[fromIdx].ID)
	}
	return d, label, nil
}

// runNote is a run's note, with who started it when that is known (a run imported from CorTeX).
func runNote(r reports.Run) string {
	if r.Owner == "" {
		return r.Note
	}
	return strings.TrimSpace(r.Note + " (by " + r.Owner + ")")
}
