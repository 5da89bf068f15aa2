package main

import (
	"archive/zip"
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
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

// latexmlRun is a corpus of sample papers converted by a replica and workers over loopback.
type latexmlRun struct {
	t      *testing.T
	d      *testDB
	root   string
	worker *process
}

// convertSamples imports the samples for tex_to_html, starts a replica (cortexq serve) and a
// worker (cortexq worker ARGS... with the replica's endpoints) and waits until every task has a
// status.
func convertSamples(t *testing.T, samples []latexml.Sample, workerArgs ...string) *latexmlRun {
	t.Helper()
	d := newTestDB(t)
	d.ok("service", "add", "tex_to_html", "--lease-timeout", "4m")
	root := t.TempDir()
	for _, s := range samples {
		data, err := s.Zip()
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(root, s.Name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, s.Name, s.Name+".zip"), data, 0o644))
	}
	out := d.ok("import", "--corpus", "samples", "--service", "tex_to_html", root)
	require.Contains(t, out, fmt.Sprintf("%d tasks added", len(samples)))

	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	replica := d.start("serve", "--replica", "r-latexml", "--ventilator", vent, "--sink", sink, "--http", "", "--reap-interval", "1s")
	args := append([]string{"worker"}, workerArgs[0])
	args = append(args, "--ventilator", vent, "--sink", sink, "--identity", "w-latexml", "--concurrency", "2", "--throttle", "100ms")
	worker := d.start(append(args, workerArgs[1:]...)...)
	require.Eventually(t, func() bool {
		return d.count(`SELECT count(*) FROM tasks WHERE status < 0`) == len(samples)
	}, 4*time.Minute, 200*time.Millisecond, "every sample converted; replica:\n%s\nworker:\n%s", replica.log(), worker.log())
	return &latexmlRun{t: t, d: d, root: root, worker: worker}
}

// task returns a sample's status, and its messages of its current run as severity:category:what
// with the details of each.
func (r *latexmlRun) task(sample string) (status string, msgs []string, details map[string]string) {
	t := r.t
	var taskID int64
	require.NoError(t, r.d.pool.QueryRow(r.d.ctx, `SELECT id, task_status_name(status) FROM tasks WHERE entry = $1`,
		filepath.Join(r.root, sample, sample+".zip")).Scan(&taskID, &status))
	rows, err := r.d.pool.Query(r.d.ctx, `SELECT m.severity || ':' || m.category || ':' || m.what, m.details
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

// result lists the members of a sample's published result archive.
func (r *latexmlRun) result(sample string) []string {
	zr, err := zip.OpenReader(filepath.Join(r.root, sample, "tex_to_html.zip"))
	require.NoError(r.t, err)
	defer func() { _ = zr.Close() }() // only read
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return names
}

// TestLaTeXMLEndToEnd converts the sample papers with a replica (cortexq serve) and a LaTeXML
// worker (cortexq worker latexml) over loopback, and checks each task's status, its telltale
// messages and its result archive.
func TestLaTeXMLEndToEnd(t *testing.T) {
	needLatexmlc(t)
	r := convertSamples(t, latexml.Samples, "latexml", "--timeout", "3m")
	for _, s := range latexml.Samples {
		t.Run(s.Name, func(t *testing.T) {
			status, msgs, details := r.task(s.Name)
			require.Equal(t, s.Want.String(), status, "messages: %v", msgs)
			require.Contains(t, msgs, s.WantMessage)
			names := r.result(s.Name)
			require.Equal(t, "cortex.log", names[len(names)-1], "cortex.log comes last, after what its stage line times")

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
				require.NotContains(t, details[`error:undefined:\foo`], "/src/", "no scratch path")
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
	require.Equal(t, len(latexml.Samples), r.d.count(`SELECT count(*) FROM attempts WHERE worker LIKE 'w-latexml-%' AND outcome = 'accepted'`))
	require.Contains(t, r.worker.log(), "sandbox=\"bwrap (uid 65534, no network", "sandboxed by default, as the start-up line says")
	r.checkStages()
}

// checkStages checks the samples' stages as cortexq runs --stages shows them: every paper's
// worker stages recorded (convert but for the one Invalid before its run), the summary over all
// of them, and the slowest list a sort of their recorded times.
func (r *latexmlRun) checkStages() {
	t := r.t
	var out struct {
		Run     int64 `json:"run"`
		Summary struct {
			Tasks      int    `json:"tasks"`
			Bottleneck string `json:"bottleneck"`
			Stages     []struct {
				Stage string `json:"stage"`
				Count int    `json:"count"`
			} `json:"stages"`
		} `json:"summary"`
		Slowest []struct {
			TaskID  int64              `json:"task_id"`
			TotalMs float64            `json:"total_ms"`
			Stages  map[string]float64 `json:"stages"`
		} `json:"slowest"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.d.ok("runs", "--corpus", "samples", "--service", "tex_to_html", "--stages",
		"--slowest", "100", "--json")), &out))
	n := len(latexml.Samples)
	require.Equal(t, n, out.Summary.Tasks)
	require.NotEmpty(t, out.Summary.Bottleneck)
	counts := map[string]int{}
	for _, st := range out.Summary.Stages {
		counts[st.Stage] = st.Count
	}
	require.Equal(t, map[string]int{"todo": n, "reserved": n, "source": n, "worker": n, "transfer": n, "unpack": n,
		"convert": n - 1, "pack": n, "write": n, "claim_wait": n, "claim": n}, counts, "no_tex has no latexmlc run")
	// The slowest list is the recorded stages sorted by their hand-out to commit.
	rows, err := r.d.pool.Query(r.d.ctx, `SELECT task_id, stages FROM attempts WHERE outcome = 'accepted'`)
	require.NoError(t, err)
	type rec struct {
		id    int64
		total time.Duration
	}
	var recorded []rec
	for rows.Next() {
		var id int64
		var b []byte
		require.NoError(t, rows.Scan(&id, &b))
		st, err := queue.DecodeStages(b)
		require.NoError(t, err)
		recorded = append(recorded, rec{id, st[queue.StageSource] + st[queue.StageWorker] + st[queue.StageWrite] +
			st[queue.StageClaimWait] + st[queue.StageClaim]})
	}
	require.NoError(t, rows.Err())
	slices.SortFunc(recorded, func(a, b rec) int { return cmp.Or(cmp.Compare(b.total, a.total), cmp.Compare(a.id, b.id)) })
	require.Len(t, out.Slowest, n)
	for i, s := range out.Slowest {
		require.Equal(t, recorded[i].id, s.TaskID, "rank %d", i)
		require.InDelta(t, float64(recorded[i].total)/float64(time.Millisecond), s.TotalMs, 0.001)
	}
	text := r.d.ok("runs", "--corpus", "samples", "--service", "tex_to_html", "--stages", "--slowest", "3")
	require.Regexp(t, `(?m)^convert\s+5\s+(\d+ms|\d+\.\ds)\s`, text, "the stage table")
	require.Contains(t, text, "the 3 slowest tasks, hand-out to commit")

	// The run's time view in the dashboard: the same table, the slowest first, linked.
	_, base := r.d.startWeb()
	resp, err := http.Get(base + "/runs/time?corpus=samples&service=tex_to_html")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
	require.Contains(t, string(page), "<td>convert</td><td>5</td>")
	require.Contains(t, string(page), fmt.Sprintf(`<a href="/task/%d">%d</a>`, recorded[0].id, recorded[0].id), "the slowest task, linked")
}

// A LaTeXML worker that cannot sandbox refuses to start and says how to run without it; with
// --sandbox=none it starts, warns, and its start-up line says so.
func TestLaTeXMLWorkerWithoutSandbox(t *testing.T) {
	t.Parallel()
	needLatexmlc(t)
	r := cortexq(t, nil, "worker", "latexml", "--sandbox-bwrap", "/bin/false", "--ventilator", "tcp://127.0.0.1:1", "--sink", "tcp://127.0.0.1:1")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "cannot run a sandbox here")
	require.Contains(t, r.stderr, "--sandbox=none")
	require.NotContains(t, r.stderr, "worker started")

	r = cortexq(t, nil, "worker", "latexml", "--sandbox", "nope")
	require.Equal(t, 2, r.code, r.stderr)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "worker", "latexml", "--sandbox=none", "--ventilator", "tcp://127.0.0.1:1", "--sink", "tcp://127.0.0.1:1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var seen strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "worker started") {
			break
		}
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	_, _ = io.Copy(io.Discard, stderr)
	_ = cmd.Wait() // stopped by the test
	require.Contains(t, seen.String(), "conversions run unconfined (--sandbox=none)")
	require.Contains(t, seen.String(), "sandbox=none")
}

// latexmlExecRecipe is the cortexq worker exec recipe of docs/latexml.md, after the "--".
var latexmlExecRecipe = []string{"sh", "-c", `cd "$(dirname "$2")" && latexmlc --whatsin=archive --whatsout=archive --format=html5 --log=cortex.log --destination="$2" "$1" >/dev/null 2>&1; test -s "$2"`, "latexml", "{in}", "{out}"}

// TestLaTeXMLExecRecipe converts samples with the documented worker exec recipe: latexmlc
// reading and writing archives, its log as the result's cortex.log.
func TestLaTeXMLExecRecipe(t *testing.T) {
	needLatexmlc(t)
	var samples []latexml.Sample
	for _, s := range latexml.Samples {
		if s.Name == "sections_math" || s.Name == "undefined_macro" || s.Name == "many_errors" {
			samples = append(samples, s)
		}
	}
	// Sandboxed: {in} and {out} are mapped into the sandbox, and the recipe runs unchanged.
	r := convertSamples(t, samples, append([]string{"exec", "--service", "tex_to_html", "--timeout", "3m", "--sandbox=bwrap", "--"}, latexmlExecRecipe...)...)
	for _, s := range samples {
		status, msgs, _ := r.task(s.Name)
		require.Equal(t, s.Want.String(), status, "%s: messages: %v", s.Name, msgs)
		require.Contains(t, msgs, s.WantMessage, s.Name)
		require.Contains(t, r.result(s.Name), "cortex.log")
	}
	require.Contains(t, r.worker.log(), "sandbox=\"bwrap (uid 65534")
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
	// The stage table ends the demo (docs/stages.md).
	require.Contains(t, out, "where the time went")
	require.Regexp(t, `(?m)^convert\s+5\s`, out, "five papers ran latexmlc; no_tex did not")
	require.Regexp(t, `(?m)^6 tasks in .*papers/s; bottleneck: `, out)
	// The report drill-down ends the demo: severities, categories of error, whats of undefined.
	require.Regexp(t, `(?m)^error\s+1\s+20\.00%$`, out)
	require.Regexp(t, `(?m)^undefined\s+1\s+1$`, out)
	require.Regexp(t, `(?m)^\\foo\s+1\s+1$`, out)
	require.Equal(t, 180, d.count(`SELECT lease_timeout_seconds FROM services WHERE name = 'tex_to_html'`),
		"a new service gets a lease a minute longer than the 2m conversion timeout")
}
