package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/web"
)

// BenchmarkWebHostile loads the pages of the hostile task (hostileLog, with the statistics
// autovacuum gathers: the log page, the task page and the report's page of its messages, and
// their twins in the API), one
// at a time, reporting the median and p95 of the loads with the load average
// (docs/web.md#bounded-work-issue-50):
//
//	go test -run '^$' -bench BenchmarkWebHostile -benchtime 20x ./queue/web
func BenchmarkWebHostile(b *testing.B) {
	f := newFixture(b, web.Config{})
	f.hostile()
	srv, err := web.New(web.Config{Base: f.base, Store: f.store})
	require.NoError(b, err)
	for _, p := range append(hostilePaths(f), hostileAPIPaths(f)...) {
		b.Run(p.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
				took = append(took, time.Since(t0))
				require.Equal(b, http.StatusOK, rec.Code, p.path)
			}
			slices.Sort(took)
			p95 := took[min(len(took)-1, (len(took)*95+99)/100-1)]
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(took[len(took)/2]), "median_ms")
			b.ReportMetric(ms(p95), "p95_ms")
			load, _ := os.ReadFile("/proc/loadavg")
			fmt.Fprintf(os.Stderr, "web hostile bench: %-16s median %8.1f ms, p95 %8.1f ms over %d loads (loadavg %.14s)\n",
				p.name, ms(took[len(took)/2]), ms(p95), len(took), load)
		})
	}
}

type namedPath struct{ name, path string }

// hostilePaths are the hostile task's pages: its log, its page, the report's page of its
// messages.
func hostilePaths(f *fixture) []namedPath {
	return []namedPath{
		{"log", fmt.Sprintf("/task/%d/log", f.warn)},
		{"task", fmt.Sprintf("/task/%d", f.warn)},
		{"report_messages", "/report?corpus=papers&service=tex_to_html&severity=warning&category=latex&what=amp&limit=1000"},
	}
}

// hostileAPIPaths are the API's twins of the hostile task's pages (the log has none: the API
// links to its download).
func hostileAPIPaths(f *fixture) []namedPath {
	return []namedPath{
		{"api_task_messages", fmt.Sprintf("/api/v1/tasks/%d/messages?limit=1000", f.warn)},
		{"api_report_tasks", "/api/v1/corpora/papers/services/tex_to_html/report/tasks?severity=warning&category=latex&what=amp&limit=1000"},
	}
}
