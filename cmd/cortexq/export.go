package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/internal/version"
	"github.com/cortexq/cortexq/queue/export"
	"github.com/cortexq/cortexq/queue/jobops"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "bundle a corpus's result archives (or their HTML) into ZIP files per month or severity, with a manifest",
		Description: "Writes into --out one ZIP file per group of the tasks of --corpus and --service whose status is one\n" +
			"of --severity: by month (of the arXiv identifier in the entry's name: 1905.12345 is 2019-05,\n" +
			"math/0211159 is 2002-11, any other unknown), by severity, or none (one file). Each holds the\n" +
			"tasks' result archives, under their directory relative to the corpus's path, or with --html\n" +
			"only the HTML files inside them. Beside them, manifest.json records the corpus, service, newest\n" +
			"run, severities, grouping, cortexq's version, and per archive its task counts per severity and\n" +
			"SHA-256.\n" +
			"\n" +
			"Each archive is written under a dot name and renamed when complete. Running it again resumes: an\n" +
			"archive the manifest lists with the same counts and size is kept, any other (partial, truncated,\n" +
			"or with other tasks) is rebuilt, and a run that changes nothing writes nothing. Memory stays\n" +
			"bounded: the tasks are read a page at a time and spooled per group to files in --out.\n" +
			"\n" +
			"--detach runs it as a background job instead (--out must then be an absolute path that the job\n" +
			"runners see). docs/operations.md#exporting-a-dataset",
		Flags: []cli.Flag{
			corpusFlag("the corpus to export"),
			serviceFlag("the service whose results to export"),
			&cli.StringFlag{Name: "out", Usage: "output `DIR` (created if missing)", EnvVars: envVars("EXPORT_OUT")},
			&cli.StringFlag{Name: "group-by", Usage: "one archive per month, severity, or none", Value: export.ByMonth, EnvVars: envVars("EXPORT_GROUP_BY")},
			&cli.StringFlag{Name: "severity", Usage: "comma-separated `LIST` of severities to export (no_problem, warning, error, fatal, invalid)", Value: "no_problem,warning,error", EnvVars: envVars("EXPORT_SEVERITY")},
			&cli.BoolFlag{Name: "html", Usage: "bundle only the HTML files of each result archive", EnvVars: envVars("EXPORT_HTML")},
			&cli.DurationFlag{Name: "progress-every", Usage: "print a progress line to stderr this often (0: none)", Value: 5 * time.Second, EnvVars: envVars("EXPORT_PROGRESS_EVERY")},
			&cli.BoolFlag{Name: "json", Usage: "print the manifest as JSON", EnvVars: envVars("EXPORT_JSON")},
			detachFlag(),
		},
		Action: runExport,
	}
}

func runExport(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := required(c, flagCorpus, flagService, "out"); err != nil {
		return err
	}
	out, err := filepath.Abs(c.String("out"))
	if err != nil {
		return err
	}
	req := export.Request{Corpus: c.String(flagCorpus), Service: c.String(flagService), Out: out,
		GroupBy: c.String("group-by"), HTML: c.Bool("html"), Version: version.Release()}
	for _, s := range strings.Split(c.String("severity"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			req.Severities = append(req.Severities, s)
		}
	}
	if err := req.Check(); err != nil {
		return usagef(c, "%v", err)
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	noteOf(c).Target = "corpus " + req.Corpus + ", service " + req.Service
	if c.Bool("detach") {
		return enqueueDetached(c, root, jobops.KindExport, req)
	}
	progress := newCountProgress("export", c.App.ErrWriter, c.Duration("progress-every"))
	req.Progress = progress.set
	began := time.Now()
	sum, err := export.Run(c.Context, root.Pool, req)
	progress.stop()
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(sum.Manifest)
	}
	took := time.Since(began)
	fmt.Fprintf(c.App.Writer, "export of %s/%s into %s: %d archives written (%.1f MB, %.1f MB/s), %d kept; counts %v; %d missing results; in %s\n",
		req.Corpus, req.Service, out, sum.Written, float64(sum.Bytes)/1e6, float64(sum.Bytes)/1e6/max(took.Seconds(), 1e-3),
		sum.Kept, sum.Manifest.Counts, sum.Manifest.Missing, took.Round(time.Millisecond))
	return nil
}
