package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/text"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "drill down into the results of a corpus and service: severities, categories, whats, tasks",
		Description: "Without --severity: the tasks of each status (no_problem, warning, error, fatal, invalid, and\n" +
			"todo, in_flight, blocked) with their share of the tasks; Invalid tasks are left out of the total the\n" +
			"shares are of, as CorTeX does. --severity S: the categories of the messages of severity S (info for\n" +
			"no_problem) in the current runs of the tasks with status S, each with its tasks and messages; a\n" +
			"Fatal task with no fatal message is listed under category no_messages. --category C: the whats of\n" +
			"C. --what W: the messages of W with their tasks (id, entry, details).\n" +
			"\n" +
			"Every level ends with the cortexq rerun line that reruns exactly the slice shown (and a sandbox\n" +
			"create takes the same flags). Lists are sorted by tasks, then messages, and paged with --limit\n" +
			"(at most 1000) and --offset (at most 100000). A sandbox is a corpus: give its name as --corpus.\n" +
			"\n" +
			"The category and what levels read rollups that the replicas fold every --fold-interval (cortexq\n" +
			"serve): the line under their rows says how old the last fold is and how many changes wait for\n" +
			"the next; --fold folds those first.\n" +
			"docs/reports.md shows the psql query behind each level.",
		Flags: append(append([]cli.Flag{
			corpusFlag("corpus (or sandbox) to report on"),
			serviceFlag("service to report on"),
			&cli.BoolFlag{Name: "fold", Usage: "fold the changes noted since the last fold into the rollups first (as cortexq fold; needs write access)", EnvVars: envVars("REPORT_FOLD")},
		}, selectionFlags("report")...), pageFlags("report")...),
		Action: runReport,
	}
}

// reportStatuses are the report's rows without --severity, in order.
var reportStatuses = []queue.Status{queue.StatusNoProblem, queue.StatusWarning, queue.StatusError,
	queue.StatusFatal, queue.StatusInvalid, queue.StatusTODO, queue.StatusDispatched, queue.StatusBlocked}

// statusName is a status's name in reports: in_flight for dispatched.
func statusName(s queue.Status) string {
	if s == queue.StatusDispatched {
		return "in_flight"
	}
	return s.String()
}

// selectionFlags are --severity, --category and --what, which select a slice of a corpus's
// tasks the same way for report, rerun and sandbox create; env names the command in their
// environment variables.
func selectionFlags(env string) []cli.Flag {
	env = strings.ToUpper(env) + "_"
	return []cli.Flag{
		&cli.StringFlag{
			Name:    "severity",
			Usage:   "only tasks with this status: no_problem, warning, error, fatal or invalid",
			EnvVars: envVars(env + "SEVERITY"),
		},
		&cli.StringFlag{
			Name:    "category",
			Usage:   "only tasks with a message of this category (no_messages: with --severity, none of its severity)",
			EnvVars: envVars(env + "CATEGORY"),
		},
		&cli.StringFlag{
			Name:    "what",
			Usage:   "only tasks with a message of this what",
			EnvVars: envVars(env + "WHAT"),
		},
		&cli.BoolFlag{
			Name: "all",
			Usage: "every task whatever its status: --severity info, warning, error, fatal or invalid then selects the tasks " +
				"with a message of that severity, not the tasks of that status (CorTeX's all tasks)",
			EnvVars: envVars(env + "ALL"),
		},
	}
}

// selectionOf reads the selection flags into a rerun scope (without its corpus and service).
func selectionOf(c *cli.Context) (lease.RerunScope, error) {
	if sev := strings.ToLower(c.String("severity")); c.Bool("all") && sev != "" {
		if !reports.IsAllSeverity(sev) {
			return lease.RerunScope{}, usagef(c, "--severity %q: with --all, want one of info, warning, error, fatal, invalid", sev)
		}
		if c.String("category") == queue.NoMessages {
			return lease.RerunScope{}, usagef(c, "--category %s: not with --all", queue.NoMessages)
		}
		return lease.RerunScope{Severity: sev, Category: c.String("category"), What: c.String("what")}, nil
	}
	scope, err := lease.SelectSlice(c.String("severity"), c.String("category"), c.String("what"))
	if err != nil {
		return scope, usagef(c, "--%v", err)
	}
	return scope, nil
}

// pageFlags are --limit, --offset, --json and --csv.
func pageFlags(env string) []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{
			Name:    "limit",
			Usage:   fmt.Sprintf("rows per page, at most %d", reports.ReportMaxLimit),
			Value:   100,
			EnvVars: envVars(strings.ToUpper(env) + "_LIMIT"),
		},
		&cli.IntFlag{
			Name:    "offset",
			Usage:   fmt.Sprintf("rows to skip, at most %d", reports.ReportMaxOffset),
			EnvVars: envVars(strings.ToUpper(env) + "_OFFSET"),
		},
	}, formatFlags(env)...)
}

// formatFlags are --json and --csv.
func formatFlags(env string) []cli.Flag {
	env = strings.ToUpper(env) + "_"
	return []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print JSON (one document) instead of a table", EnvVars: envVars(env + "JSON")},
		&cli.BoolFlag{Name: "csv", Usage: "print CSV (a header line, then the rows) instead of a table", EnvVars: envVars(env + "CSV")},
	}
}

// openBaseNoArgs opens the base for a command that takes no arguments, after checking it got
// none.
func openBaseNoArgs(c *cli.Context) (*base.Base, func(), error) {
	if err := noArgs(c); err != nil {
		return nil, nil, err
	}
	return openBase(c)
}

// openListBase checks the arguments of a list command taking formatFlags (none, and not both
// --json and --csv) and opens the base.
func openListBase(c *cli.Context) (*base.Base, func(), error) {
	if err := noArgs(c); err != nil {
		return nil, nil, err
	}
	if c.Bool("json") && c.Bool("csv") {
		return nil, nil, usagef(c, "give --json or --csv, not both")
	}
	return openBase(c)
}

// pageOf checks --limit, --offset and the output format.
func pageOf(c *cli.Context) (limit, offset int, err error) {
	limit, offset = c.Int("limit"), c.Int("offset")
	switch {
	case limit < 1 || limit > reports.ReportMaxLimit:
		return 0, 0, usagef(c, "--limit %d: want 1 to %d", limit, reports.ReportMaxLimit)
	case offset < 0 || offset > reports.ReportMaxOffset:
		return 0, 0, usagef(c, "--offset %d: want 0 to %d", offset, reports.ReportMaxOffset)
	case c.Bool("json") && c.Bool("csv"):
		return 0, 0, usagef(c, "give --json or --csv, not both")
	}
	return limit, offset, nil
}

// scopeOfNamed looks up --corpus and --service; a name that does not exist is a usage error.
func scopeOfNamed(c *cli.Context, root *base.Base) (queue.Scope, error) {
	scope, err := scopeOf(c, root)
	if errors.Is(err, queue.ErrNotFound) {
		return scope, usagef(c, "%v", err)
	}
	return scope, err
}

// table is what a report level prints: a title, a header and rows, and the command that acts
// on what it shows.
type table struct {
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
	// Total counts the rows of the whole list when it is paged.
	Total *int64 `json:"total,omitempty"`
	// JSON, if set, is printed by --json instead of the table.
	JSON any `json:"-"`
	// Note, if set, is a line printed after the rows (how fresh they are).
	Note string `json:"-"`
	Next string `json:"next,omitempty"`
}

// print writes t as an aligned table, JSON or CSV, as the flags say.
func (t table) print(c *cli.Context) error {
	out := c.App.Writer
	switch {
	case c.Bool("json"):
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if t.JSON != nil {
			return enc.Encode(t.JSON)
		}
		return enc.Encode(t)
	case c.Bool("csv"):
		w := csv.NewWriter(out)
		_ = w.Write(t.Header)
		_ = w.WriteAll(t.Rows)
		return w.Error()
	}
	fmt.Fprintln(out, printable(t.Title))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	line := func(cells []string) {
		widths := make([]string, len(cells))
		for i, cell := range cells {
			widths[i] = printable(cell)
		}
		fmt.Fprintln(w, strings.Join(widths, "\t"))
	}
	line(upper(t.Header))
	for _, r := range t.Rows {
		line(r)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if t.Total != nil && int64(len(t.Rows)) < *t.Total {
		fmt.Fprintf(out, "(%d of %s rows shown: --offset %d --limit %d)\n", len(t.Rows), commas(*t.Total), c.Int("offset"), c.Int("limit"))
	}
	if t.Note != "" {
		fmt.Fprintln(out, printable(t.Note))
	}
	if t.Next != "" {
		fmt.Fprintln(out, printable(t.Next))
	}
	return nil
}

func upper(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strings.ToUpper(v)
	}
	return out
}

// commas writes n with thousands separators: 1,234,567.
var commas = text.Commas

// percent is 100·n/of with two decimals, "-" when of is 0.
func percent(n, of int64) string {
	if of == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(n)/float64(of), 'f', 2, 64) + "%"
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.,/:=+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commandLine is a cortexq command line: the command, then flag and value pairs (those with
// an empty value left out), quoted for a shell.
func commandLine(cmd string, pairs ...string) string {
	parts := []string{"cortexq", cmd}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			parts = append(parts, "--"+pairs[i], shellQuote(pairs[i+1]))
		}
	}
	return strings.Join(parts, " ")
}

func runReport(c *cli.Context) error {
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
	sevName := strings.ToLower(c.String("severity"))
	category, what := c.String("category"), c.String("what")
	switch {
	case category != "" && sevName == "":
		return usagef(c, "--category needs --severity")
	case what != "" && category == "":
		return usagef(c, "--what needs --category")
	}
	if c.Bool("json") {
		return reportAsAPI(c, sevName, category, what, limit, offset)
	}
	if c.Bool("all") {
		return runReportAll(c, sevName, category, what, limit, offset)
	}
	sevStatus, sevMessage, ok := queue.ReportSeverity(sevName)
	if sevName != "" && !ok {
		return usagef(c, "--severity %q: want one of %s", sevName, queue.ReportSeverityNames())
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
	q := reportQuery{corpus: c.String(flagCorpus), service: c.String(flagService), sevName: sevName,
		category: category, what: what, limit: limit, offset: offset}
	q.rerun = commandLine("rerun", flagCorpus, q.corpus, flagService, q.service, "severity", sevName, "category", category, "what", what)
	q.where = fmt.Sprintf("corpus %s, service %s", q.corpus, q.service)
	if sevName == "" {
		return reportSummary(c, root, scope, q)
	}
	slice := reports.Slice{Scope: scope, Status: sevStatus, Severity: sevMessage,
		Category: category, What: what, Limit: limit, Offset: offset}
	if what != "" {
		return reportMessages(c, root, slice, q)
	}
	return reportLevel(c, root, slice, q)
}

// reportQuery is what `cortexq report` was asked, as its output repeats it.
type reportQuery struct {
	corpus, service, sevName, category, what string
	limit, offset                            int
	rerun, where                             string
}

// reportSummary prints the report's first level: the tasks of each final status.
func reportSummary(c *cli.Context, root *base.Base, scope queue.Scope, q reportQuery) error {
	rerun, where := q.rerun, q.where
	counts, err := root.Reports.ReportStatuses(c.Context, scope)
	if err != nil {
		return err
	}
	var all int64
	for _, n := range counts {
		all += n
	}
	total := all - counts[queue.StatusInvalid]
	t := table{
		Title:  fmt.Sprintf("%s: %s tasks, %s of them not Invalid (the total of the percentages)", where, commas(all), commas(total)),
		Header: []string{"severity", "tasks", "percent"},
		Next:   "rerun all: " + rerun,
	}
	type row struct {
		Severity string   `json:"severity"`
		Tasks    int64    `json:"tasks"`
		Percent  *float64 `json:"percent"`
	}
	var rows []row
	for _, st := range reportStatuses {
		n := queue.StatusCount(counts, st)
		pc := percent(n, total)
		r := row{Severity: statusName(st), Tasks: n}
		if st == queue.StatusInvalid {
			pc = "-"
		} else if total > 0 {
			p := 100 * float64(n) / float64(total)
			r.Percent = &p
		}
		rows = append(rows, r)
		t.Rows = append(t.Rows, []string{statusName(st), commas(n), pc})
	}
	if c.Bool("csv") {
		for i, r := range rows {
			t.Rows[i][1] = strconv.FormatInt(r.Tasks, 10)
		}
	}
	return t.print(c)
}

// reportMessages prints the report's last level: a what's messages and their tasks.
func reportMessages(c *cli.Context, root *base.Base, slice reports.Slice, q reportQuery) error {
	rerun, where := q.rerun, q.where
	sevName, category, what := q.sevName, q.category, q.what
	if c.Bool("fold") { // the page's tasks are those of the last fold
		if err := foldAll(c, root); err != nil {
			return err
		}
	}
	msgs, err := root.Reports.ReportMessages(c.Context, slice)
	if err != nil {
		return err
	}
	t := table{
		Title:  fmt.Sprintf("%s: severity %s, category %s, what %s: messages and their tasks", where, sevName, category, what),
		Header: []string{"task_id", "entry", "details"},
		Next:   "rerun these tasks: " + rerun,
	}
	for _, m := range msgs {
		t.Rows = append(t.Rows, []string{strconv.FormatInt(m.TaskID, 10), m.Entry, m.Details})
	}
	return t.print(c)
}

// reportLevel prints the category level of a severity, or the what level of a category.
func reportLevel(c *cli.Context, root *base.Base, slice reports.Slice, q reportQuery) error {
	rerun, where := q.rerun, q.where
	sevName, category := q.sevName, q.category
	if c.Bool("fold") {
		if err := foldAll(c, root); err != nil {
			return err
		}
	}
	fold, err := root.Reports.ReportFoldState(c.Context)
	if err != nil {
		return err
	}
	var rows []reports.ReportRow
	var total int64
	level, title := "category", fmt.Sprintf("%s: severity %s, by category", where, sevName)
	if category == "" {
		rows, total, err = root.Reports.ReportCategories(c.Context, slice)
	} else {
		level, title = "what", fmt.Sprintf("%s: severity %s, category %s, by what", where, sevName, category)
		rows, total, err = root.Reports.ReportWhats(c.Context, slice)
	}
	if err != nil {
		return err
	}
	t := table{Title: title, Header: []string{level, "tasks", "messages"}, Total: &total,
		Note: foldAge(fold), Next: "rerun this slice: " + rerun}
	for _, r := range rows {
		if c.Bool("csv") {
			t.Rows = append(t.Rows, []string{r.Name, strconv.FormatInt(r.Tasks, 10), strconv.FormatInt(r.Messages, 10)})
		} else {
			t.Rows = append(t.Rows, []string{r.Name, commas(r.Tasks), commas(r.Messages)})
		}
	}
	return t.print(c)
}

// foldAge says how fresh the rollups a category or what level reads are.
func foldAge(f reports.FoldState) string {
	var s string
	if f.FoldedAt == nil {
		s = fmt.Sprintf("counts as of no fold yet (%s changes wait for one: cortexq fold, or a replica's periodic fold)", commas(f.Pending))
	} else {
		s = fmt.Sprintf("counts as of the fold %s ago (%s; %s changes wait for the next)",
			f.Age.Round(time.Second), zoned(*f.FoldedAt, time.DateTime), commas(f.Pending))
	}
	if note := f.StandbyNote(); note != "" {
		s += "; " + note
	}
	return s
}

// runReportAll is cortexq report --all: a severity's messages in every task whatever its
// status (docs/reports.md#all-tasks).
func runReportAll(c *cli.Context, sevName, category, what string, limit, offset int) error {
	if sevName != "" && !reports.IsAllSeverity(sevName) {
		return usagef(c, "--severity %q: with --all, want one of info, warning, error, fatal, invalid", sevName)
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
	if c.Bool("fold") { // the all-tasks counts are the fold's
		if err := foldAll(c, root); err != nil {
			return err
		}
	}
	q := allQuery{corpus: c.String(flagCorpus), service: c.String(flagService), severity: sevName, category: category, what: what,
		rerun: commandLine("rerun", flagCorpus, c.String(flagCorpus), flagService, c.String(flagService), "severity", sevName, "category", category, "what", what) + " --all"}
	q.where = fmt.Sprintf("corpus %s, service %s, all tasks", q.corpus, q.service)
	sl := reports.Slice{Scope: scope, Severity: queue.Severity(sevName), Category: category, What: what, Limit: limit, Offset: offset}
	switch {
	case sevName == "":
		return reportAllSeverities(c, root.Reports, scope, q)
	case what != "":
		return reportAllMessages(c, root.Reports, sl, q)
	default:
		return reportAllNames(c, root.Reports, sl, q)
	}
}

// allQuery is what cortexq report --all was asked, as its levels print it.
type allQuery struct {
	corpus, service, severity, category, what string
	where, rerun                              string
}

// num writes n for a table: plain with --csv, else with commas.
func num(c *cli.Context, n int64) string {
	if c.Bool("csv") {
		return strconv.FormatInt(n, 10)
	}
	return commas(n)
}

// reportAllSeverities prints, per severity, the tasks with a message of it and those messages.
func reportAllSeverities(c *cli.Context, rep *reports.Store, scope queue.Scope, q allQuery) error {
	counts, err := rep.ReportStatuses(c.Context, scope)
	if err != nil {
		return err
	}
	var all int64
	for _, n := range counts {
		all += n
	}
	sevs, err := rep.ReportAllSeverities(c.Context, scope)
	if err != nil {
		return err
	}
	t := table{Title: fmt.Sprintf("%s: %s; per severity, the tasks with a message of it and those messages", q.where, commas(all)+" tasks"),
		Header: []string{"severity", "tasks", "messages", "percent"}}
	for _, sev := range reports.AllSeverities {
		r := sevs[sev]
		t.Rows = append(t.Rows, []string{r.Name, num(c, r.Tasks), num(c, r.Messages), percent(r.Tasks, all)})
	}
	return t.print(c)
}

// reportAllMessages prints a page of a what's messages in every task, with their tasks.
func reportAllMessages(c *cli.Context, rep *reports.Store, sl reports.Slice, q allQuery) error {
	msgs, err := rep.ReportAllMessages(c.Context, sl)
	if err != nil {
		return err
	}
	t := table{Title: fmt.Sprintf("%s: severity %s, category %s, what %s: messages and their tasks", q.where, q.severity, q.category, q.what),
		Header: []string{"task_id", "status", "entry", "details"}, Next: "rerun these tasks: " + q.rerun}
	for _, m := range msgs {
		t.Rows = append(t.Rows, []string{strconv.FormatInt(m.TaskID, 10), statusName(*m.Status), m.Entry, m.Details})
	}
	return t.print(c)
}

// reportAllNames prints a page of a severity's categories, or a category's whats, in every task.
func reportAllNames(c *cli.Context, rep *reports.Store, sl reports.Slice, q allQuery) error {
	level, title := "category", fmt.Sprintf("%s: severity %s, by category", q.where, q.severity)
	if q.category != "" {
		level, title = "what", fmt.Sprintf("%s: severity %s, category %s, by what", q.where, q.severity, q.category)
	}
	rows, total, err := rep.ReportAllNames(c.Context, sl)
	if err != nil {
		return err
	}
	t := table{Title: title, Header: []string{level, "tasks", "messages"}, Total: &total, Next: "rerun this slice: " + q.rerun}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.Name, num(c, r.Tasks), num(c, r.Messages)})
	}
	return t.print(c)
}
