package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/web"
)

// BenchmarkAPILadder walks the API's report ladder (severity → category → what → tasks, by
// status and in every task) with a task and its messages on the arXiv-like corpus BenchmarkReport
// (queue/reports) keeps in $CORTEXQ_REPORT_BENCH_DSN (1,000,000 tasks at scale 1), each rung
// read as a client would (through the dashboard's handler, in its slots, JSON written), and
// reports the p95 and median of the loads (two loads warm each up):
//
//	CORTEXQ_REPORT_BENCH_DSN=… CORTEXQ_REPORT_BENCH_SCALE=1 go test -run '^$' -bench BenchmarkReport -benchtime 1x -timeout 2h ./queue/reports
//	CORTEXQ_REPORT_BENCH_DSN=… go test -run '^$' -bench BenchmarkAPILadder -benchtime 20x ./queue/web
func BenchmarkAPILadder(b *testing.B) {
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
	_, err = catalog.New(pool, nil).LookupScope(ctx, "arxiv", "tex_to_html")
	require.NoError(b, err, "no corpus arxiv: run BenchmarkReport on this database first")
	srv, err := web.New(web.Config{Base: base.New(pool, nil, nil), Store: lease.New(pool, lease.Config{})})
	require.NoError(b, err)
	get := func(path string) map[string]any {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(b, http.StatusOK, rec.Code, "%s: %s", path, rec.Body.String())
		var m map[string]any
		require.NoError(b, json.Unmarshal(rec.Body.Bytes(), &m))
		return m
	}
	scope := "/api/v1/corpora/arxiv/services/tex_to_html"
	first := func(m map[string]any) string { return m["rows"].([]any)[0].(map[string]any)["name"].(string) }
	q := url.QueryEscape
	cat := first(get(scope + "/report/categories?severity=error"))
	what := first(get(scope + "/report/whats?severity=error&category=" + q(cat)))
	tasks := scope + "/report/tasks?severity=error&category=" + q(cat) + "&what=" + q(what)
	task := int64(get(tasks)["tasks"].([]any)[0].(map[string]any)["task_id"].(float64))
	wcat := first(get(scope + "/report/categories?severity=warning&all=1"))
	wwhat := first(get(scope + "/report/whats?severity=warning&all=1&category=" + q(wcat)))
	var heavy int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT task_id FROM task_message_logs ORDER BY cardinality(kinds) DESC LIMIT 1`).Scan(&heavy))
	rungs := []struct{ name, path string }{
		{"severities", scope + "/report"},
		{"categories_error", scope + "/report/categories?severity=error"},
		{"categories_warning", scope + "/report/categories?severity=warning"},
		{"whats_error_top", scope + "/report/whats?severity=error&category=" + q(cat)},
		{"tasks_error_top", tasks},
		{"tasks_error_top_1000", tasks + "&limit=1000"},
		{"tasks_error_top_page_50", tasks + "&offset=5000"},
		{"all_severities", scope + "/report?all=1"},
		{"all_categories_warning", scope + "/report/categories?severity=warning&all=1"},
		{"all_whats_warning_top", scope + "/report/whats?severity=warning&all=1&category=" + q(wcat)},
		{"all_tasks_warning_top", scope + "/report/tasks?severity=warning&all=1&category=" + q(wcat) + "&what=" + q(wwhat)},
		{"task", fmt.Sprintf("/api/v1/tasks/%d", task)},
		{"task_messages", fmt.Sprintf("/api/v1/tasks/%d/messages", task)},
		{"task_most_messages_1000", fmt.Sprintf("/api/v1/tasks/%d/messages?limit=1000", heavy)},
		{"runs", scope + "/runs"},
		{"status", "/api/v1/status"},
	}
	for _, r := range rungs {
		b.Run(r.name, func(b *testing.B) {
			get(r.path)
			get(r.path)
			var took []time.Duration
			for range b.N {
				t0 := time.Now()
				get(r.path)
				took = append(took, time.Since(t0))
			}
			slices.Sort(took)
			p95 := took[min(len(took)-1, (len(took)*95+99)/100-1)]
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(p95), "p95_ms")
			b.ReportMetric(0, "ns/op")
			load, _ := os.ReadFile("/proc/loadavg")
			fmt.Fprintf(os.Stderr, "api bench: %-26s p95 %8.1f ms, median %8.1f ms over %d loads (loadavg %.14s)\n",
				r.name, ms(p95), ms(took[len(took)/2]), len(took), load)
		})
	}
}
