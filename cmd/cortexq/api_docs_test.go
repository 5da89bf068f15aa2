package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
)

// apiConverter is the workers' converter in TestDocsAPIWorkflows: by the staged task's number,
// no problem, a warning, an error, or (one in four) a fatal of two kinds, until the fix (a file
// beside it) is made; then the fatal ones convert with no problem.
const apiConverter = `import os, re, sys, zipfile
src, out = sys.argv[1], sys.argv[2]
n = int(re.search(rb"sample document (\d+)", zipfile.ZipFile(src).read("content.tex")).group(1))
logs = ["Status:conversion:0\n", "Warning:undefined:cite no target\nStatus:conversion:1\n",
        "Error:undefined:foo macro \\foo\nStatus:conversion:2\n",
        "Fatal:latex:emergency_stop no legal \\end\nStatus:conversion:3\n" if n % 8 == 3 else
        "Fatal:latex:runaway_argument paragraph ended\nStatus:conversion:3\n"]
log = logs[n % 4]
if n % 4 == 3 and os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixed")):
    log = logs[0]
with zipfile.ZipFile(out, "w") as z:
    z.writestr("cortex.log", log)
`

// docSession is the code block of docs/api.md under <!-- session: name -->.
func docSession(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/api.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- session: " + name + " -->\n```[a-z]*\n(.*?)```").FindSubmatch(b)
	require.NotNil(t, m, "docs/api.md has no session %s", name)
	return string(m[1])
}

// runSession runs a session of docs/api.md with bash (-eo pipefail) or python3 in dir, against
// the dashboard at url, and returns its output.
func runSession(t *testing.T, dir, lang, code, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eo", "pipefail", "-c", code)
	if lang == "python" {
		cmd = exec.CommandContext(ctx, "python3", "-c", code)
	}
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CORTEXQ_URL="+url, "CORTEXQ_TOKEN="+docsToken)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s:\n%s", code, out)
	return string(out)
}

const docsToken = "docs-admin-token-0123456789"

// apiJSON gets an API answer and decodes it.
func apiJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	code, body := get(t, url)
	require.Equal(t, 200, code, body)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	return m
}

// cliJSON runs a read command with --json and decodes it.
func (d *testDB) cliJSON(args ...string) map[string]any {
	d.t.Helper()
	out := d.ok(append(args, "--json")...)
	var m map[string]any
	require.NoError(d.t, json.Unmarshal([]byte(out), &m), out)
	return m
}

// TestDocsAPIWorkflows runs the drill-down, the campaign and the notebook of docs/api.md with
// curl and jq against a dashboard beside a live replica and real workers (an exec worker whose
// converter fails one task in four), and checks their numbers against the CLI's --json and the
// pages.
func TestDocsAPIWorkflows(t *testing.T) {
	for _, tool := range []string{"curl", "jq", "python3"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "scripts/install-deps installs %s", tool)
	}
	d := newTestDB(t)
	d.ok("service", "add", "tex_to_html")
	const tasks = 24
	staged, err := bench.StageCorpus(d.ctx, t.TempDir(), tasks, 1024)
	require.NoError(t, err)
	d.importList("arxiv", "tex_to_html", staged...)
	conv := filepath.Join(t.TempDir(), "convert.py")
	require.NoError(t, os.WriteFile(conv, []byte(apiConverter), 0o644))
	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	replica := d.start("serve", "--replica", "r-api", "--ventilator", vent, "--sink", sink,
		"--http", fmt.Sprintf("127.0.0.1:%d", loopbackPort(t)), "--fold-interval", "500ms", "--reap-interval", "500ms")
	worker := d.start("worker", "exec", "--service", "tex_to_html", "--ventilator", vent, "--sink", sink,
		"--identity", "w-api", "--concurrency", "2", "--throttle", "100ms", "--io-timeout", "10s", "--", "python3", conv, "{in}", "{out}")
	done := func() bool { return d.count(`SELECT count(*) FROM tasks WHERE status BETWEEN -5 AND -1`) == tasks }
	require.Eventually(t, done, 2*time.Minute, 100*time.Millisecond, "every task converted; worker:\n%s", worker.log())
	d.ok("fold")
	_, url := d.startWeb("--admin-token", docsToken)
	dir := t.TempDir()
	scope := url + "/api/v1/corpora/arxiv/services/tex_to_html"

	// The drill-down: its numbers, the CLI's and the page's.
	out := runSession(t, dir, "sh", docSession(t, "drilldown"), url)
	require.Contains(t, out, "arxiv/tex_to_html: 24 of 24 done, 6 fatal")
	require.Contains(t, out, "fatal\t6\t25%")
	require.Contains(t, out, "fatal / latex / emergency_stop")
	require.Regexp(t, `(?m)^3$`, out, "three papers stopped")
	require.Regexp(t, `(?m)^task \d+: fatal, run \d+, 1 attempt\(s\)$`, out)
	require.Contains(t, out, "fatal:latex:emergency_stop no legal \\end")
	d.checkSameAsCLI(t, scope, url)

	// The campaign: fix the converter, rerun the fatal slice, watch it, diff the runs.
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(conv), "fixed"), nil, 0o644))
	out = runSession(t, dir, "sh", docSession(t, "campaign"), url)
	require.Regexp(t, `run \d+ opened for 6 tasks; run \d+ closed`, out)
	require.Contains(t, out, "fatal -> no_problem: 6\n")
	require.Contains(t, out, "no_problem -> no_problem: 6\n")
	require.Regexp(t, `(?m)^6$`, out, "the six papers mended")
	require.Equal(t, 12, d.count(`SELECT count(*) FROM tasks WHERE status = -1`))
	runs := apiJSON(t, scope+"/runs")["runs"].([]any)
	before := int64(runs[len(runs)-2].(map[string]any)["id"].(float64))
	diff := apiJSON(t, fmt.Sprintf("%s/diff?from=%d", scope, before))
	cli := d.cliJSON("diff", "--corpus", "arxiv", "--service", "tex_to_html", "--from", fmt.Sprint(before))
	require.Equal(t, cli["cells"], diff["cells"], "the API's diff is the CLI's")

	// The notebook.
	out = runSession(t, dir, "python", docSession(t, "python"), url)
	require.Contains(t, out, "'no_problem': 12, 'warning': 6, 'error': 6, 'fatal': 0")
	require.Equal(t, 0, worker.stop(syscall.SIGTERM, time.Minute), worker.log())
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second), replica.log())
}

// checkSameAsCLI: the API's status, report rungs and task answer what the CLI's --json prints,
// and the report page shows the same counts.
func (d *testDB) checkSameAsCLI(t *testing.T, scope, url string) {
	t.Helper()
	status := apiJSON(t, url+"/api/v1/status")["scopes"].([]any)[0].(map[string]any)
	cliStatus := d.cliJSON("status")["scopes"].([]any)[0].(map[string]any)
	for _, k := range []string{"corpus", "service", "tasks", "todo", "done", "no_problem", "warning", "error", "fatal", "invalid", "blocked"} {
		require.Equal(t, cliStatus[k], status[k], k)
	}
	noAge := func(m map[string]any) map[string]any {
		if f, ok := m["fold"].(map[string]any); ok {
			delete(f, "age_seconds")
			delete(f, "folded_at") // the replica folds every 500 ms
		}
		return m
	}
	report := []string{"report", "--corpus", "arxiv", "--service", "tex_to_html"}
	require.Equal(t, d.cliJSON(report...), apiJSON(t, scope+"/report"))
	require.Equal(t, noAge(d.cliJSON(append(report, "--severity", "fatal")...)), noAge(apiJSON(t, scope+"/report/categories?severity=fatal")))
	whats := noAge(apiJSON(t, scope+"/report/whats?severity=fatal&category=latex"))
	require.Equal(t, noAge(d.cliJSON(append(report, "--severity", "fatal", "--category", "latex")...)), whats)
	tasks := apiJSON(t, scope+"/report/tasks?severity=fatal&category=latex&what=emergency_stop")
	require.Equal(t, d.cliJSON(append(report, "--severity", "fatal", "--category", "latex", "--what", "emergency_stop")...), tasks)
	id := int64(tasks["tasks"].([]any)[0].(map[string]any)["task_id"].(float64))
	require.Equal(t, d.cliJSON("task", "show", fmt.Sprint(id)), apiJSON(t, fmt.Sprintf("%s/api/v1/tasks/%d", url, id)))
	code, page := get(t, url+"/report?corpus=arxiv&service=tex_to_html")
	require.Equal(t, 200, code)
	require.Contains(t, page, `severity=fatal">fatal</a></td><td>6</td>`)
	code, page = get(t, url+"/report?corpus=arxiv&service=tex_to_html&severity=fatal&category=latex")
	require.Equal(t, 200, code)
	require.Contains(t, page, ">emergency_stop</a></td><td>3</td>")
	require.True(t, strings.Contains(page, ">runaway_argument</a></td><td>3</td>"), "the page's whats are the API's")
}
