package web_test

import (
	"context"
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

// BenchmarkWebPages loads each page of the dashboard on the arXiv-like corpus that
// BenchmarkReport (queue/reports) generates and keeps in $CORTEXQ_REPORT_BENCH_DSN, reporting the
// p95 of the loads (two loads warm each page up), and the cost of the overview's live figures:
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
	errSlice := reports.Slice{Scope: sc, Status: -3, Severity: "error", Limit: 100}
	rep := reports.New(pool, nil, nil)
	cats, _, err := rep.ReportCategories(ctx, errSlice)
	require.NoError(b, err)
	errSlice.Category = cats[0].Name
	whats, _, err := rep.ReportWhats(ctx, errSlice)
	require.NoError(b, err)
	runs, err := rep.Runs(ctx, sc)
	require.NoError(b, err)
	var task, heavy int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT min(l.task_id) FROM task_message_logs l WHERE EXISTS (SELECT 1 FROM message_kinds k WHERE k.id = ANY(l.kinds) AND k.severity = 'error')`).Scan(&task))
	require.NoError(b, pool.QueryRow(ctx, `SELECT task_id FROM task_message_logs ORDER BY cardinality(kinds) DESC LIMIT 1`).Scan(&heavy))

	var infoCat string
	require.NoError(b, pool.QueryRow(ctx, `SELECT category FROM message_kinds WHERE severity = 'info' ORDER BY id LIMIT 1`).Scan(&infoCat))
	srv, err := web.New(web.Config{Base: base.New(pool, nil, nil), Store: store, LiveMaxAge: time.Nanosecond, LiveBudget: time.Hour})
	require.NoError(b, err)
	q := "corpus=arxiv&service=tex_to_html"
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"live", "/live"},
		{"report", "/report?" + q},
		{"report_warning", "/report?" + q + "&severity=warning"},
		{"report_error_category", "/report?" + q + "&severity=error&category=" + url.QueryEscape(cats[0].Name)},
		{"report_error_what", "/report?" + q + "&severity=error&category=" + url.QueryEscape(cats[0].Name) + "&what=" + url.QueryEscape(whats[0].Name)},
		{"runs", "/runs?" + q},
		{"runs_diff_current", fmt.Sprintf("/runs?%s&from=%d&to=current", q, runs[len(runs)-2].ID)},
		{"runs_diff_closed", fmt.Sprintf("/runs?%s&from=%d&to=%d", q, runs[0].ID, runs[len(runs)-2].ID)},
		{"task", fmt.Sprintf("/task/%d", task)},
		{"task_most_messages", fmt.Sprintf("/task/%d", heavy)},
		{"workers", "/workers"},
		{"search_entry", "/search?q=" + url.QueryEscape("/4321/")},
		{"search_common", "/search?q=source.zip"},
		{"dead", "/dead"},
		{"report_all", "/report?" + q + "&all=1"},
		{"report_all_warning", "/report?" + q + "&all=1&severity=warning"},
		{"report_info_category", "/report?" + q + "&severity=info&category=" + url.QueryEscape(infoCat)},
	}
	load := func(path string) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(b, http.StatusOK, rec.Code, path)
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			load(p.path)
			load(p.path)
			var took []time.Duration
			for range b.N {
				t0 := time.Now()
				load(p.path)
				took = append(took, time.Since(t0))
			}
			slices.Sort(took)
			p95 := took[min(len(took)-1, (len(took)*95+99)/100-1)]
			b.ReportMetric(float64(p95.Microseconds())/1000, "p95_ms")
			b.ReportMetric(0, "ns/op")
			fmt.Fprintf(os.Stderr, "web bench: %-24s p95 %8.1f ms, median %8.1f ms over %d loads\n", p.name,
				float64(p95.Microseconds())/1000, float64(took[len(took)/2].Microseconds())/1000, len(took))
		})
	}
}
