package cortex_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/cortex"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/cortexsite"
)

// benchRows adds to a CorTeX site a corpus "bench" of @N@ documents: an entry and a tex_to_html
// task each, nine in ten finished (a runtime and 23 messages each: 9 infos, 8 warnings, 5 errors,
// a fatal), one in ten TODO. At @N@ = 1,000,000 that is issue 61's scale: 20.7 million messages.
const benchRows = `
INSERT INTO corpora (path, name, complex, description) VALUES ('/corpus/bench', 'bench', true, 'a benchmark');
INSERT INTO tasks (service_id, corpus_id, status, entry)
SELECT s.id, c.id, -1, '/corpus/bench/' || lpad((g % 1000)::text, 4, '0') || '/d' || g || '/d' || g || '.zip'
FROM generate_series(1, @N@) g, services s, corpora c WHERE s.name = 'import' AND c.name = 'bench';
INSERT INTO tasks (service_id, corpus_id, status, entry)
SELECT s.id, c.id, CASE WHEN g % 10 = 0 THEN 0 WHEN g % 10 < 4 THEN -1 WHEN g % 10 < 7 THEN -2 WHEN g % 10 < 9 THEN -3 ELSE -4 END,
       '/corpus/bench/' || lpad((g % 1000)::text, 4, '0') || '/d' || g || '/d' || g || '.zip'
FROM generate_series(1, @N@) g, services s, corpora c WHERE s.name = 'tex_to_html' AND c.name = 'bench';
CREATE TEMP TABLE done AS SELECT t.id, t.service_id FROM tasks t JOIN corpora c ON c.id = t.corpus_id
	JOIN services s ON s.id = t.service_id WHERE c.name = 'bench' AND s.name = 'tex_to_html' AND t.status < 0;
INSERT INTO task_runtimes (task_id, service_id, runtime_ms) SELECT id, service_id, (id % 9000)::int FROM done;
INSERT INTO log_infos (task_id, category, what, details)
SELECT d.id, 'info_cat' || (k % 7), 'what_' || ((d.id + k) % 40), 'some details of info ' || k || ' on line ' || (d.id % 977)
FROM done d, generate_series(1, 9) k;
INSERT INTO log_warnings (task_id, category, what, details)
SELECT d.id, 'undefined_macro', '\m' || ((d.id * k) % 300), 'warning at line ' || k || ':' || (d.id % 1013)
FROM done d, generate_series(1, 8) k;
INSERT INTO log_errors (task_id, category, what, details)
SELECT d.id, 'err_cat' || (k % 5), 'e' || ((d.id + k) % 120), 'error details ' || k FROM done d, generate_series(1, 5) k;
INSERT INTO log_fatals (task_id, category, what, details) SELECT d.id, 'fatal', 'timeout', NULL FROM done d;
ANALYZE;`

// BenchmarkImport imports corpus "bench" of $CORTEXQ_CORTEX_BENCH_TASKS documents (20,000 unless
// set; issue 61 measured 1,000,000) into an empty database each time. Progress lines, with the
// time each step ended, go to the benchmark's log with -v.
func BenchmarkImport(b *testing.B) {
	n := 20000
	if v := os.Getenv("CORTEXQ_CORTEX_BENCH_TASKS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err, "CORTEXQ_CORTEX_BENCH_TASKS")
	}
	ctx := context.Background()
	site := cortexsite.New(b, "/corpus")
	owner, err := pgx.Connect(ctx, site.DSN)
	require.NoError(b, err)
	_, err = owner.Exec(ctx, strings.ReplaceAll(benchRows, "@N@", strconv.Itoa(n)))
	require.NoError(b, err)
	require.NoError(b, owner.Close(ctx))
	var messages int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dst := queuetest.NewPool(b)
		var progress strings.Builder
		b.StartTimer()
		src, err := pgx.Connect(ctx, site.ReaderDSN)
		require.NoError(b, err)
		sum, err := cortex.Import(ctx, src, dst, cortex.Config{Corpora: []string{"bench"}, Progress: &progress})
		require.NoError(b, err)
		require.NoError(b, src.Close(ctx))
		b.StopTimer()
		b.Log(progress.String())
		messages = sum.Corpora[0].Messages
		require.Equal(b, int64(n), sum.Corpora[0].Added, "tasks added")
		b.StartTimer()
	}
	b.ReportMetric(float64(messages)*float64(b.N)/b.Elapsed().Seconds(), "messages/s")
}
