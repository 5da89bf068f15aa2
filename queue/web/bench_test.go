package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/web"
)

// benchWorkers is how many workers the attempts trail of BenchmarkWebPages spreads over.
const benchWorkers = 40

// benchTrail gives the corpus BenchmarkReport generated an attempts trail, once: an attempt for
// each task that ran in the current run, leased over the last 5 days by benchWorkers workers
// through 3 replicas (so about a fifth of them in the last day, a 120th in the last hour); 2%
// of the Fatal tasks dead-lettered, the tasks in flight holding a lease, a tenth of the TODO
// ones queued for a retry; the workers and replicas on record, some active, some idle, some
// gone. Written in set-based statements behind the write paths' backs, as the corpus is.
func benchTrail(b *testing.B, pool *pgxpool.Pool, sc queue.Scope) {
	b.Helper()
	ctx := context.Background()
	var have bool
	require.NoError(b, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM attempts)`).Scan(&have))
	if have {
		return
	}
	start := time.Now()
	exec := func(what, sql string, args ...any) {
		b.Helper()
		t0 := time.Now()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(b, err, what)
		fmt.Fprintf(os.Stderr, "web bench: trail: %s in %s\n", what, time.Since(t0).Round(time.Millisecond))
	}
	// A task's lease time: spread over 5 days (432,000 s) by a hash of its id that is not
	// correlated with its status (the generator's hash of statuses is modulo 100).
	exec("attempts of finished tasks", `
		INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, answered_at, outcome, status)
		SELECT t.id, t.run, 0, 'worker-' || (t.id % $2), 'replica-' || (t.id % 3), x.at, x.at + interval '40 seconds',
		       CASE WHEN t.status = -4 AND hashint8(t.id) % 50 = 0 THEN 'dead_lettered' ELSE 'accepted' END, t.status
		FROM tasks t, LATERAL (SELECT now() - ((t.id * 104729 + 17) % 432001) * interval '1 second' AS at) AS x
		WHERE t.corpus_id = $1 AND t.status BETWEEN -5 AND -1`, sc.CorpusID, benchWorkers)
	exec("dead letters' dispatch rows", `
		INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, answered, finished_attempt, finished_status,
		                      replica, service_id, lease_timeout_seconds, leased_at, dead_lettered, forget_at, received_at,
		                      last_cause)
		SELECT a.task_id, a.run, 'settling', ARRAY[a.worker], a.leased_at + interval '1 hour', true, 0, -4,
		       a.replica, $2, 3600, a.leased_at, true, now() + interval '1 day', a.answered_at,
		       '[{"severity":"fatal","category":"worker","what":"crashed","details":"the worker died 3 times"}]'::jsonb
		FROM attempts a JOIN tasks t ON t.id = a.task_id
		WHERE t.corpus_id = $1 AND a.outcome = 'dead_lettered'`, sc.CorpusID, sc.ServiceID)
	exec("leases in flight", `
		WITH t AS (SELECT id, run, now() - (id % 600) * interval '1 second' AS at, 'worker-' || (id % $2) AS worker,
		                  'replica-' || (id % 3) AS replica
		           FROM tasks WHERE corpus_id = $1 AND status = 1),
		a AS (INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at)
		      SELECT id, run, 0, worker, replica, at FROM t)
		INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, replica, service_id, lease_timeout_seconds, leased_at)
		SELECT id, run, 'in_flight', ARRAY[worker], at + interval '1 hour', replica, $3, 3600, at FROM t`,
		sc.CorpusID, benchWorkers, sc.ServiceID)
	exec("queued retries", `
		WITH t AS (SELECT id, run, now() - (id % 3600) * interval '1 second' AS at, 'worker-' || (id % $2) AS worker,
		                  'replica-' || (id % 3) AS replica
		           FROM tasks WHERE corpus_id = $1 AND status = 0 AND hashint8(id) % 10 = 0),
		a AS (INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, answered_at, outcome, status)
		      SELECT id, run, 0, worker, replica, at, at + interval '1 minute', 'retryable', -4 FROM t)
		INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, answered, replica, service_id,
		                      lease_timeout_seconds, leased_at, queued, retries, forget_at, last_cause)
		SELECT id, run, 'settling', ARRAY[worker], at + interval '1 hour', true, replica, $3, 3600, at, true, 1,
		       now() + interval '1 hour',
		       '[{"severity":"fatal","category":"worker","what":"timeout","details":"no answer within the lease"}]'::jsonb
		FROM t`, sc.CorpusID, benchWorkers, sc.ServiceID)
	// Workers seen 0 to 39 minutes ago: a few active, most idle, some gone.
	exec("workers", `
		INSERT INTO workers (name, service_id, first_seen, last_request, last_result, dispatched, results)
		SELECT 'worker-' || w, $1, now() - interval '5 days', now() - w * interval '1 minute', now() - w * interval '1 minute',
		       count(*), count(*) FILTER (WHERE a.outcome IS NOT NULL)
		FROM generate_series(0, $2 - 1) AS w JOIN attempts a ON a.worker = 'worker-' || w
		GROUP BY w`, sc.ServiceID, benchWorkers)
	exec("replica heartbeats", `
		INSERT INTO replica_heartbeats (replica, started_at, seen_at, stopped)
		SELECT 'replica-' || r, now() - interval '5 days', now() - r * interval '20 seconds', r = 2
		FROM generate_series(0, 2) AS r`)
	exec("vacuum analyze", `VACUUM ANALYZE attempts, dispatch, workers, replica_heartbeats`)
	fmt.Fprintf(os.Stderr, "web bench: trail written in %s\n", time.Since(start).Round(time.Second))
}

// BenchmarkWebPages loads each page of the dashboard on the arXiv-like corpus that
// BenchmarkReport (queue/reports) generates and keeps in $CORTEXQ_REPORT_BENCH_DSN, with the
// attempts trail benchTrail adds to it, reporting the p95 and median of the loads (two loads
// warm each page up), and the cost of reading the attempts trail's figures (which the pages
// read in the background):
//
//	CORTEXQ_REPORT_BENCH_DSN=… CORTEXQ_REPORT_BENCH_SCALE=1 go test -run '^$' -bench BenchmarkReport -benchtime 1x ./queue/reports
//	CORTEXQ_REPORT_BENCH_DSN=… go test -run '^$' -bench BenchmarkWebPages -benchtime 20x ./queue/web
func BenchmarkWebPages(b *testing.B) {
	dsn := os.Getenv("CORTEXQ_REPORT_BENCH_DSN")
	if dsn == "" {
		b.Fatal("set CORTEXQ_REPORT_BENCH_DSN to a database where BenchmarkReport (queue/reports) generated its corpus")
	}
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(b, err)
	reports.TuneReportPool(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	store := lease.New(pool, lease.Config{})
	sc, err := catalog.New(pool, nil).LookupScope(ctx, "arxiv", "tex_to_html")
	require.NoError(b, err, "no corpus arxiv: run BenchmarkReport on this database first")
	benchTrail(b, pool, sc)
	errSlice := reports.Slice{Scope: sc, Status: -3, Severity: "error", Limit: 100}
	rep := reports.New(pool, nil, nil)
	cats, _, err := rep.ReportCategories(ctx, errSlice)
	require.NoError(b, err)
	errSlice.Category = cats[0].Name
	whats, _, err := rep.ReportWhats(ctx, errSlice)
	require.NoError(b, err)
	runs, err := rep.Runs(ctx, sc)
	require.NoError(b, err)
	var task, heavy, dead, last int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT min(l.task_id) FROM task_message_logs l WHERE EXISTS (SELECT 1 FROM message_kinds k WHERE k.id = ANY(l.kinds) AND k.severity = 'error')`).Scan(&task))
	require.NoError(b, pool.QueryRow(ctx, `SELECT task_id FROM task_message_logs ORDER BY cardinality(kinds) DESC LIMIT 1`).Scan(&heavy))
	require.NoError(b, pool.QueryRow(ctx, `SELECT min(task_id) FROM attempts WHERE outcome = 'dead_lettered'`).Scan(&dead))
	require.NoError(b, pool.QueryRow(ctx, `SELECT max(id) FROM tasks`).Scan(&last))

	var infoCat string
	require.NoError(b, pool.QueryRow(ctx, `SELECT category FROM message_kinds WHERE severity = 'info' ORDER BY id LIMIT 1`).Scan(&infoCat))
	// The pages on a dashboard as configured by default (the attempts trail read in the
	// background within its budget); /live on one that computes it afresh each time.
	srv, err := web.New(web.Config{Base: base.New(pool, nil, nil), Store: store})
	require.NoError(b, err)
	live, err := web.New(web.Config{Base: base.New(pool, nil, nil), Store: store, LiveMaxAge: time.Nanosecond, LiveBudget: time.Hour})
	require.NoError(b, err)
	q := "corpus=arxiv&service=tex_to_html"
	cell := func(from, to string, fs, ts int) string {
		return fmt.Sprintf("/runs/cell?%s&from=%s&to=%s&fs=%d&ts=%d", q, from, to, fs, ts)
	}
	prev, first := fmt.Sprint(runs[len(runs)-2].ID), fmt.Sprint(runs[0].ID)
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"live", "/live"},
		{"report", "/report?" + q},
		{"report_warning", "/report?" + q + "&severity=warning"},
		{"report_error_category", "/report?" + q + "&severity=error&category=" + url.QueryEscape(cats[0].Name)},
		{"report_error_what", "/report?" + q + "&severity=error&category=" + url.QueryEscape(cats[0].Name) + "&what=" + url.QueryEscape(whats[0].Name)},
		{"runs", "/runs?" + q},
		{"runs_diff_current", "/runs?" + q + "&from=" + prev + "&to=current"},
		{"runs_diff_closed", "/runs?" + q + "&from=" + first + "&to=" + prev},
		{"diff_cell_current", cell(prev, "current", -3, -3)},
		{"diff_cell_current_rare", cell(prev, "current", -2, -6)},
		{"diff_cell_closed", cell(first, prev, -3, -3)},
		{"task", fmt.Sprintf("/task/%d", task)},
		{"task_most_messages", fmt.Sprintf("/task/%d", heavy)},
		{"task_dead_lettered", fmt.Sprintf("/task/%d", dead)},
		{"search_id", fmt.Sprintf("/search?q=%d", last)},
		{"search_entry", "/search?q=" + url.QueryEscape("/4321/")},
		{"search_rare", "/search?q=" + url.QueryEscape("/987654/")},
		{"search_none", "/search?q=" + url.QueryEscape("/source.tar")},
		{"search_digits", "/search?q=" + url.QueryEscape("77/7")},
		{"search_common", "/search?q=source.zip"},
		{"dead", "/dead"},
		{"workers", "/workers"},
		{"worker_attempts", "/workers/attempts?worker=worker-7"},
		{"report_all", "/report?" + q + "&all=1"},
		{"report_all_warning", "/report?" + q + "&all=1&severity=warning"},
		{"report_info_category", "/report?" + q + "&severity=info&category=" + url.QueryEscape(infoCat)},
	}
	if only := os.Getenv("CORTEXQ_WEB_BENCH_PAGES"); only != "" {
		pages = slices.DeleteFunc(pages, func(p struct{ name, path string }) bool { return !slices.Contains(strings.Split(only, ","), p.name) })
	}
	load := func(path string) {
		rec := httptest.NewRecorder()
		if path == "/live" {
			live.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		} else {
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		}
		if rec.Code != http.StatusSeeOther { // a search by a task's id goes to its page
			require.Equal(b, http.StatusOK, rec.Code, path)
		}
	}
	measure := func(b *testing.B, name string, call func()) {
		call()
		call()
		var took []time.Duration
		for range b.N {
			t0 := time.Now()
			call()
			took = append(took, time.Since(t0))
		}
		slices.Sort(took)
		p95 := took[min(len(took)-1, (len(took)*95+99)/100-1)]
		b.ReportMetric(float64(p95.Microseconds())/1000, "p95_ms")
		b.ReportMetric(0, "ns/op")
		var load [3]float64
		if f, err := os.ReadFile("/proc/loadavg"); err == nil {
			_, _ = fmt.Sscan(string(f), &load[0], &load[1], &load[2])
		}
		fmt.Fprintf(os.Stderr, "web bench: %-24s p95 %8.1f ms, median %8.1f ms over %d loads (load %.1f)\n", name,
			float64(p95.Microseconds())/1000, float64(took[len(took)/2].Microseconds())/1000, len(took), load[0])
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) { measure(b, p.name, func() { load(p.path) }) })
	}
	// The attempts trail's figures: the sparklines and the throughput charts (the last hour's
	// minutes, the last day's quarters), the replicas, the dead letters and last minute's
	// activity. The overview and /live read them in the background (web.Config.LiveBudget).
	ins := inspect.New(pool, nil)
	trail := []struct {
		name string
		call func() error
	}{
		{"trail_throughput_hour", func() error { _, err := ins.Throughput(ctx); return err }},
		{"trail_throughput_day", func() error { _, err := ins.ThroughputDay(ctx); return err }},
		{"trail_replicas", func() error { _, err := ins.ReplicaLoads(ctx); return err }},
		{"trail_activity", func() error { _, err := ins.Activity(ctx); return err }},
	}
	for _, t := range trail {
		if only := os.Getenv("CORTEXQ_WEB_BENCH_PAGES"); only != "" && !slices.Contains(strings.Split(only, ","), t.name) {
			continue
		}
		b.Run(t.name, func(b *testing.B) { measure(b, t.name, func() { require.NoError(b, t.call()) }) })
	}
}
