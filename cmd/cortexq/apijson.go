package main

// The --json of the read commands: the API's types (queue/api), built by the same functions the
// dashboard's API calls, so a script gets from the CLI what it gets from /api/v1 (docs/api.md).

import (
	"encoding/json"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/reports"
)

// printJSON prints v as the API answers it, indented.
func printJSON(c *cli.Context, v any) error {
	enc := json.NewEncoder(c.App.Writer)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// reportAsAPI is cortexq report --json: the rung the flags name, as GET
// /api/v1/corpora/{corpus}/services/{service}/report… answers it.
func reportAsAPI(c *cli.Context, severity, category, what string, limit, offset int) error {
	q := api.ReportQuery{Corpus: c.String(flagCorpus), Service: c.String(flagService), Severity: severity,
		Category: category, What: what, All: c.Bool("all"), Limit: limit, Offset: offset}
	if err := q.Check(); err != nil {
		return usagef(c, "--%v", err)
	}
	root, done, err := openBase(c, reports.TuneReportPool)
	if err != nil {
		return err
	}
	defer done()
	if q.Scope, err = scopeOfNamed(c, root); err != nil {
		return err
	}
	if c.Bool("fold") {
		if err := foldAll(c, root); err != nil {
			return err
		}
	}
	var v any
	switch {
	case q.Severity == "":
		v, err = api.ReadSeverities(c.Context, root.Reports, q)
	case q.What == "":
		v, err = api.ReadNames(c.Context, root.Reports, q)
	default:
		v, err = api.ReadTasks(c.Context, root.Reports, q)
	}
	if err != nil {
		return err
	}
	return printJSON(c, v)
}
