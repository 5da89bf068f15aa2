package main

import (
	"archive/zip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/worker/latexml"
)

// needLatexmlc skips a test when latexmlc is not installed, except under CI, where
// scripts/install-deps installs it and its absence is a failure.
func needLatexmlc(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(latexml.LatexmlcDefault); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("latexmlc is required under CI (scripts/install-deps installs latexml): %v", err)
		}
		t.Skipf("latexmlc not installed (apt-get install latexml): %v", err)
	}
}

// TestLaTeXMLEndToEnd converts the sample papers with a replica (cortexq serve) and a LaTeXML
// worker (cortexq worker latexml) over loopback, and checks each task's status, its telltale
// messages and its result archive.
func TestLaTeXMLEndToEnd(t *testing.T) {
	needLatexmlc(t)
	d := newTestDB(t)
	d.ok("service", "add", "tex_to_html", "--lease-timeout", "4m")
	root := t.TempDir()
	for _, s := range latexml.Samples {
		data, err := s.Zip()
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(root, s.Name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, s.Name, s.Name+".zip"), data, 0o644))
	}
	out := d.ok("import", "--corpus", "samples", "--service", "tex_to_html", root)
	require.Contains(t, out, fmt.Sprintf("%d tasks added", len(latexml.Samples)))

	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	replica := d.start("serve", "--replica", "r-latexml", "--ventilator", vent, "--sink", sink, "--http", "", "--reap-interval", "1s")
	worker := d.start("worker", "latexml", "--ventilator", vent, "--sink", sink, "--identity", "w-latexml",
		"--concurrency", "2", "--throttle", "100ms", "--timeout", "3m")
	require.Eventually(t, func() bool {
		return d.count(`SELECT count(*) FROM tasks WHERE status < 0`) == len(latexml.Samples)
	}, 4*time.Minute, 200*time.Millisecond, "every sample converted; replica:\n%s\nworker:\n%s", replica.log(), worker.log())

	// messages lists a task's messages of its current run as severity:category:what.
	messages := func(sample string) (status string, msgs []string, details map[string]string) {
		var taskID int64
		require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT id, task_status_name(status) FROM tasks WHERE entry = $1`,
			filepath.Join(root, sample, sample+".zip")).Scan(&taskID, &status))
		rows, err := d.pool.Query(d.ctx, `SELECT m.severity || ':' || m.category || ':' || m.what, m.details
			FROM task_messages m JOIN tasks t ON t.id = m.task_id AND t.run = m.run WHERE t.id = $1 ORDER BY m.id`, taskID)
		require.NoError(t, err)
		defer rows.Close()
		details = map[string]string{}
		for rows.Next() {
			var key, det string
			require.NoError(t, rows.Scan(&key, &det))
			msgs = append(msgs, key)
			details[key] = det
		}
		require.NoError(t, rows.Err())
		return status, msgs, details
	}
	for _, s := range latexml.Samples {
		t.Run(s.Name, func(t *testing.T) {
			status, msgs, details := messages(s.Name)
			require.Equal(t, s.Want.String(), status, "messages: %v", msgs)
			require.Contains(t, msgs, s.WantMessage)

			// The result archive is published beside the source, cortex.log first.
			zr, err := zip.OpenReader(filepath.Join(root, s.Name, "tex_to_html.zip"))
			require.NoError(t, err)
			defer zr.Close()
			require.Equal(t, "cortex.log", zr.File[0].Name)
			var names []string
			for _, f := range zr.File {
				names = append(names, f.Name)
			}

			switch s.Name {
			case "no_tex":
				require.Equal(t, []string{"invalid:no_tex:all"}, msgs, "nothing but the verdict")
				require.Equal(t, []string{"cortex.log"}, names)
				return
			case "sections_math":
				require.Equal(t, "main.tex", details["info:cortexq:main_tex"], "the file with \\documentclass, not sections/intro.tex")
				require.NotContains(t, strings.Join(msgs, " "), "error:", "no error")
			case "bibliography":
				require.Equal(t, "paper.tex", details["info:cortexq:main_tex"])
			case "undefined_macro":
				require.Contains(t, details[`error:undefined:\foo`], "is not defined")
				require.Contains(t, details[`error:undefined:\foo`], "at main.tex; line 4", "the location is kept in the details")
				require.NotContains(t, details[`error:undefined:\foo`], root, "no scratch path")
			case "missing_package":
				require.Equal(t, "ms.tex", details["info:cortexq:main_tex"], "the preferred name")
				require.Contains(t, details["warning:missing_file:cortexqmissing"], "Can't find binding for package cortexqmissing")
			case "many_errors":
				n := 0
				for _, m := range msgs {
					if strings.HasPrefix(m, "error:undefined:") {
						n++
					}
				}
				require.GreaterOrEqual(t, n, 100, "every error up to LaTeXML's limit is recorded")
			}
			require.Contains(t, msgs, "info:cortexq:latexmlc")
			require.Contains(t, names, "latexml.log")
			require.Contains(t, names, strings.TrimSuffix(details["info:cortexq:main_tex"], ".tex")+".html")
		})
	}
	require.Equal(t, len(latexml.Samples), d.count(`SELECT count(*) FROM attempts WHERE worker LIKE 'w-latexml-%' AND outcome = 'accepted'`))
}

// TestDemoLatexml runs cortexq demo --latexml on a test database: it converts the samples and
// fails unless each gets its documented status.
func TestDemoLatexml(t *testing.T) {
	needLatexmlc(t)
	d := newTestDB(t)
	out := d.ok("demo", "--latexml", "--dir", t.TempDir())
	require.Regexp(t, `Done: 6 papers in`, out)
	require.Contains(t, out, "no_problem 2  warning 1  error 1  fatal 1  invalid 1")
	for _, s := range latexml.Samples {
		require.Regexp(t, fmt.Sprintf(`(?m)^\d+\s+%s\s+%s\s+%s\s`, s.Name, s.Want, s.Want), out)
	}
	require.NotContains(t, out, "differs")
	require.Equal(t, 180, d.count(`SELECT lease_timeout_seconds FROM services WHERE name = 'tex_to_html'`),
		"a new service gets a lease a minute longer than the 2m conversion timeout")
}
