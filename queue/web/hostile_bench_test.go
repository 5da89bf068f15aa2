package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/web"
)

// BenchmarkWebHostile loads the pages of the hostile task (hostileLog: the log page, the task
// page and the report's page of its messages), one at a time.
func BenchmarkWebHostile(b *testing.B) {
	f := newFixture(b, web.Config{})
	f.hostile()
	srv, err := web.New(web.Config{Base: f.base, Store: f.store})
	require.NoError(b, err)
	for _, p := range hostilePaths(f) {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
				require.Equal(b, http.StatusOK, rec.Code, p.path)
			}
		})
	}
}

type namedPath struct{ name, path string }

func hostilePaths(f *fixture) []namedPath {
	return []namedPath{
		{"log", fmt.Sprintf("/task/%d/log", f.warn)},
		{"task", fmt.Sprintf("/task/%d", f.warn)},
		{"report_messages", "/report?corpus=papers&service=tex_to_html&severity=warning&category=latex&what=amp&limit=1000"},
	}
}
