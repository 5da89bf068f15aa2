package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/queuetest"
)

// The monitoring files shipped in scripts/monitoring (docs/monitoring.md): the alert rules, their
// unit tests, and the Grafana dashboard, tested with Debian's promtool and prometheus.

// monitoringDir is scripts/monitoring, from this package's directory.
const monitoringDir = "../../scripts/monitoring"

// TestMonitoringRules checks the rules and the scrape example with promtool and runs the rules'
// unit tests (cortexq-rules.test.yml).
func TestMonitoringRules(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"check", "rules", "cortexq-rules.yml"},
		{"check", "config", "prometheus.yml"},
		{"test", "rules", "cortexq-rules.test.yml"},
	} {
		cmd := exec.Command("promtool", args...)
		cmd.Dir = monitoringDir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestMonitoringMetricsLint runs a replica, converts a few tasks and checks every metric it
// exports with promtool check metrics (names, units, help).
func TestMonitoringMetricsLint(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, queuetest.ConnString(t))
	rig.stage("lint", "", 20, 256)
	rp := rig.addReplica("lint", "--fold-interval", "1s")
	rig.startReplicas()
	rig.startWorkers(1, 2)
	rig.waitFor("every task done", 2*time.Minute, allTerminal, nil)
	deadline := time.Now().Add(30 * time.Second)
	var body string
	for {
		code, b, err := faultGet("http://" + rp.http + "/metrics")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
		body = b
		if strings.Contains(body, "cortexq_leader 1") && strings.Contains(body, `cortexq_tasks{corpus="lint"`) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the replica leads and exports cortexq_tasks:\n%s", body)
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range []string{"cortexq_results_total", "cortexq_workers_active", "cortexq_oldest_todo_age_seconds",
		"cortexq_report_changes_pending", "cortexq_corpus_filesystem_avail_bytes", "cortexq_build_info", "cortexq_stage_seconds"} {
		require.Contains(t, body, "\n"+name, "exported")
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
}

// testRuleWindows rewrites the rules for a test: every window and hold of N minutes becomes N
// seconds.
func testRuleWindows(rules string) string {
	return regexp.MustCompile(`(\[|for: )(\d+)m\b`).ReplaceAllString(rules, "${1}${2}s")
}

// promServer is a Prometheus of the test: its HTTP API on loopback.
type promServer struct {
	t    *testing.T
	base string
}

// startPrometheus runs Debian's prometheus on loopback, scraping the replicas every second with
// the shipped rules at test-sized windows, until the test ends.
func startPrometheus(t *testing.T, rig *faultRig, targets ...string) *promServer {
	t.Helper()
	dir := filepath.Join(rig.dir, "prometheus")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	rules, err := os.ReadFile(filepath.Join(monitoringDir, "cortexq-rules.yml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(testRuleWindows(string(rules))), 0o644))
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	config := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yml]\n"+
		"scrape_configs:\n  - job_name: cortexq\n    static_configs: [{targets: [%s]}]\n", strings.Join(quoted, ", "))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644))
	addr := fmt.Sprintf("127.0.0.1:%d", loopbackPort(t))
	p := rig.child("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	p.bin = "prometheus"
	p.start()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM, 10*time.Second)
		if t.Failed() {
			t.Logf("--- prometheus:\n%s", faultTail(p.log(), 4000))
		}
	})
	ps := &promServer{t: t, base: "http://" + addr}
	deadline := time.Now().Add(30 * time.Second)
	for code, _, err := faultGet(ps.base + "/-/ready"); err != nil || code != http.StatusOK; code, _, err = faultGet(ps.base + "/-/ready") {
		require.True(t, p.running(), "prometheus exited:\n%s", p.log())
		require.True(t, time.Now().Before(deadline), "prometheus ready within 30 s")
		time.Sleep(100 * time.Millisecond)
	}
	return ps
}

// promSample is one sample of an instant vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query at t (zero: now).
func (p *promServer) query(expr string, at time.Time) ([]promSample, error) {
	q := url.Values{"query": {expr}}
	if !at.IsZero() {
		q.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	code, body, err := faultGet(p.base + "/api/v1/query?" + q.Encode())
	if err != nil {
		return nil, err
	}
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		return nil, fmt.Errorf("query %s: status %d: %w", expr, code, err)
	}
	if resp.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, resp.Error)
	}
	if resp.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, not a vector", expr, resp.Data.ResultType)
	}
	return resp.Data.Result, nil
}

// byCorpus is a query's values by their corpus label.
func (p *promServer) byCorpus(expr string) (map[string]int64, error) {
	samples, err := p.query(expr, time.Time{})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, s := range samples {
		v, err := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		if err != nil {
			return nil, err
		}
		out[s.Metric["corpus"]] = int64(v)
	}
	return out, nil
}

// firing lists the corpora an alert fires for.
func (p *promServer) firing(alert string) ([]string, error) {
	samples, err := p.query(fmt.Sprintf(`ALERTS{alertname=%q, alertstate="firing"}`, alert), time.Time{})
	var corpora []string
	for _, s := range samples {
		corpora = append(corpora, s.Metric["corpus"])
	}
	return corpora, err
}

// dashboardQueries are the queries of the shipped dashboard's panels, with its variables set to
// any corpus and service and a rate window of 30 s.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, "cortexq-dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &dash))
	vars := strings.NewReplacer("$__rate_interval", "30s", "$corpus", ".*", "$service", ".*")
	var out []string
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has queries", p.Title)
		for _, tg := range p.Targets {
			out = append(out, vars.Replace(tg.Expr))
		}
	}
	return out
}

// TestMonitoringPrometheus runs a replica and Debian's Prometheus with the shipped rules (at
// test-sized windows) against it; workers convert part of two corpora and stop with a backlog
// left: the stalled-backlog alert fires for both, the backlog and done counts per corpus that
// Prometheus holds equal SQL's, and every query of the dashboard returns data.
func TestMonitoringPrometheus(t *testing.T) {
	skipShortFault(t)
	rig := newFaultRig(t, queuetest.ConnString(t))
	const perCorpus = 300
	rig.stage("alpha", filepath.Join(rig.dir, "alpha"), perCorpus, 256)
	rig.stage("beta", filepath.Join(rig.dir, "beta"), perCorpus, 256)
	rp := rig.addReplica("mon", "--fold-interval", "1s")
	rig.startReplicas()
	prom := startPrometheus(t, rig, rp.http)
	// Workers that take 200 ms a task (the echo worker is done in a few seconds): Prometheus
	// sees the results come in over several scrapes.
	for i := range 2 {
		w := rig.child(fmt.Sprintf("worker-%d", i), "--log-level", "warn", "worker", "exec",
			"--service", faultService, "--identity", fmt.Sprintf("mon-%d", i), "--concurrency", "2",
			"--ventilator", rp.ventilator, "--sink", rp.sink, "--throttle", "100ms", "--io-timeout", "3s",
			"--", "sh", "-c", `sleep 0.2; cp "$0" "$1"`, "{in}", "{out}")
		w.start()
		rig.workers = append(rig.workers, w)
	}
	// waitSQL waits until the scalar query returns at least min.
	waitSQL := func(what, query string, ok func(float64) bool) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			n, err := rig.scalar(query)
			require.NoError(t, err)
			if ok(n) {
				return
			}
			require.True(t, time.Now().Before(deadline), "%s within 2 minutes (%v)", what, n)
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitSQL("a sixth of the tasks done", "SELECT count(*) FROM tasks WHERE status < 0", func(n float64) bool { return n >= 2*perCorpus/6 })
	// And Prometheus has seen results come in over a few scrapes (a rate needs two samples).
	deadline := time.Now().Add(time.Minute)
	for {
		samples, err := prom.query("sum(rate(cortexq_results_total[30s])) > 0 and sum(rate(cortexq_claim_seconds_count[30s])) > 0", time.Time{})
		require.NoError(t, err)
		if len(samples) > 0 {
			break
		}
		if time.Now().After(deadline) {
			up, _ := prom.query("up", time.Time{})
			res, _ := prom.query("cortexq_results_total", time.Time{})
			_, targets, _ := faultGet(prom.base + "/api/v1/targets")
			t.Fatalf("Prometheus sees results within a minute: up %v, results %v, targets %s", up, res, targets)
		}
		time.Sleep(500 * time.Millisecond)
	}
	running := time.Now()
	for _, w := range rig.workers {
		w.stop(syscall.SIGTERM, 10*time.Second)
	}
	// The leases the workers left expire (--lease-timeout 5s) and wait for a retry.
	waitSQL("no lease out", "SELECT count(*) FROM dispatch WHERE state = 'in_flight'", func(n float64) bool { return n == 0 })
	left, err := rig.scalar("SELECT count(*) FROM tasks WHERE status = 0")
	require.NoError(t, err)
	require.Positive(t, left, "a backlog is left")

	// The stalled alert: 15 s without a result, then a hold of 5 s.
	deadline = time.Now().Add(2 * time.Minute)
	for {
		corpora, err := prom.firing("CortexqBacklogStalled")
		require.NoError(t, err)
		if len(corpora) == 2 {
			require.ElementsMatch(t, []string{"alpha", "beta"}, corpora)
			break
		}
		require.True(t, time.Now().Before(deadline), "CortexqBacklogStalled fires for both corpora within 2 minutes; firing for %v", corpora)
		time.Sleep(time.Second)
	}

	// The backlog and the done counts per corpus, as Prometheus holds them and as SQL counts.
	sqlCounts := func(where string) map[string]int64 {
		rows, err := rig.pool.Query(context.Background(), "SELECT c.name, count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE "+where+" GROUP BY c.name")
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var name string
			var n int64
			require.NoError(t, rows.Scan(&name, &n))
			out[name] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	// The replica may give back the stock it reserved meanwhile: SQL is read again each time.
	deadline = time.Now().Add(30 * time.Second)
	for {
		wantTodo, wantDone := sqlCounts("t.status = 0"), sqlCounts("t.status BETWEEN -5 AND -1")
		require.Len(t, wantTodo, 2, "both corpora have a backlog")
		todo, err := prom.byCorpus("sum by (corpus) (cortexq:tasks_todo)")
		require.NoError(t, err)
		done, err := prom.byCorpus("sum by (corpus) (cortexq:tasks_done)")
		require.NoError(t, err)
		if fmt.Sprint(todo) == fmt.Sprint(wantTodo) && fmt.Sprint(done) == fmt.Sprint(wantDone) {
			break
		}
		require.True(t, time.Now().Before(deadline), "Prometheus's backlog %v and done %v per corpus equal SQL's %v and %v", todo, done, wantTodo, wantDone)
		time.Sleep(500 * time.Millisecond)
	}

	// Every dashboard query, at a moment the workers were running.
	for _, q := range dashboardQueries(t) {
		samples, err := prom.query(q, running)
		require.NoError(t, err)
		require.NotEmpty(t, samples, "dashboard query %s returns data", q)
	}
}
