package reports

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// reportBenchScale is the share of the arXiv-sized corpus BenchmarkReport generates:
// $CORTEXQ_REPORT_BENCH_SCALE, 0.1 by default (100,000 tasks, 1,000,000 messages); 1 is the
// issue's 1,000,000 tasks over 5 runs and 10,000,000 messages, one task holding 1,000,000
// warnings.
func reportBenchScale(b *testing.B) float64 {
	s := os.Getenv("CORTEXQ_REPORT_BENCH_SCALE")
	if s == "" {
		return 0.1
	}
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(b, err, "CORTEXQ_REPORT_BENCH_SCALE")
	require.True(b, f > 0 && f <= 10, "CORTEXQ_REPORT_BENCH_SCALE: want a share in (0, 10]")
	return f
}

// generateReportCorpus fills a fresh database, in set-based statements, with a corpus of tasks
// tasks over 5 runs (4 closed, with their statuses in run_statuses, and the current one) and
// messages messages of the current runs, skewed as arXiv's are: a few categories and whats hold
// most messages, and one Warning task holds a tenth of them.
func generateReportCorpus(b *testing.B, pool *pgxpool.Pool, tasks, messages int) queue.Scope {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	exec := func(what, sql string, args ...any) {
		b.Helper()
		t0 := time.Now()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(b, err, what)
		b.Logf("generate: %s in %s", what, time.Since(t0).Round(time.Millisecond))
	}
	var sc queue.Scope
	require.NoError(b, pool.QueryRow(ctx, `INSERT INTO corpora (name, path) VALUES ('arxiv', '/arxiv') RETURNING id`).Scan(&sc.CorpusID))
	require.NoError(b, pool.QueryRow(ctx, `INSERT INTO services (name) VALUES ('tex_to_html') RETURNING id`).Scan(&sc.ServiceID))
	// Statuses of the current run by a hash of the task number: 40% NoProblem, 35% Warning,
	// 15% Error, 5% Fatal, 1% Invalid, 2% TODO, 1% in flight, 1% blocked.
	exec("tasks", `
		INSERT INTO tasks (service_id, corpus_id, entry, status, run)
		SELECT $1, $2, '/arxiv/' || (g / 1000) || '/' || g || '/source.zip',
		       CASE WHEN h < 40 THEN -1 WHEN h < 75 THEN -2 WHEN h < 90 THEN -3 WHEN h < 95 THEN -4
		            WHEN h < 96 THEN -5 WHEN h < 98 THEN 0 WHEN h < 99 THEN 1 ELSE -6 END,
		       5
		FROM generate_series(1, $3::int) AS g, LATERAL (SELECT (g::bigint * 7919 + 13) % 100 AS h) AS x`,
		sc.ServiceID, sc.CorpusID, tasks)
	// Runs 1 to 4 closed, each with its statuses: a task's status in run r is its current one,
	// but for a share of tasks that fell as the runs went (a later LaTeXML fixed them).
	exec("runs", `
		INSERT INTO runs (corpus_id, service_id, started_at, ended_at, note)
		SELECT $1, $2, now() - (6 - r) * interval '1 day', now() - (5 - r) * interval '1 day', 'run ' || r
		FROM generate_series(1, 4) AS r`, sc.CorpusID, sc.ServiceID)
	exec("current run", `INSERT INTO runs (corpus_id, service_id, started_at, note) VALUES ($1, $2, now(), 'run 5')`,
		sc.CorpusID, sc.ServiceID)
	exec("run_statuses", `
		INSERT INTO run_statuses (run_id, task_id, status)
		SELECT r.id, t.id,
		       CASE WHEN t.status IN (0, 1, -6) THEN -2::smallint
		            WHEN (t.id * 31 + r.id) % 10 < 5 - r.rn THEN greatest(t.status - 1, -5)::smallint
		            ELSE t.status END
		FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM runs
		      WHERE corpus_id = $1 AND service_id = $2 AND ended_at IS NOT NULL) AS r
		CROSS JOIN tasks t
		WHERE t.corpus_id = $1 AND t.service_id = $2`, sc.CorpusID, sc.ServiceID)
	exec("run tallies", `
		UPDATE runs u SET tasks = s.tasks, no_problem = s.np, warning = s.w, error = s.e, fatal = s.f, invalid = s.i
		FROM (SELECT run_id, count(*) AS tasks, count(*) FILTER (WHERE status = -1) AS np,
		             count(*) FILTER (WHERE status = -2) AS w, count(*) FILTER (WHERE status = -3) AS e,
		             count(*) FILTER (WHERE status = -4) AS f, count(*) FILTER (WHERE status = -5) AS i
		      FROM run_statuses GROUP BY run_id) AS s
		WHERE u.id = s.run_id`)
	// Messages: a task drawn with a skew toward low numbers (random()^2), a severity of its
	// status half the time (else a warning), and category and what drawn with steeper skews:
	// the first of 12 categories and the first few of 5,000 whats hold most messages. They are
	// written as the claim writes them (migrations/00015_message_logs.sql), a task's log one
	// row, not through task_messages' row trigger: the dictionary holds every (severity,
	// category, what) with an id computed from them, so the logs are built without a join.
	heavy := messages / 10
	exec("message kinds", `
		INSERT INTO message_kinds (id, severity, category, what) OVERRIDING SYSTEM VALUE
		SELECT 1 + (s.o - 1) * 60000 + (c.o - 1) * 5000 + w, s.name, c.name, 'w' || w
		FROM unnest(ARRAY['info', 'warning', 'error', 'fatal', 'invalid']) WITH ORDINALITY AS s(name, o),
		     unnest(ARRAY['undefined', 'missing_file', 'latex', 'expected', 'malformed', 'parse',
		                  'unexpected', 'deprecated', 'too_many_errors', 'perl', 'recursion', 'imagemagick'])
		         WITH ORDINALITY AS c(name, o),
		     generate_series(0, 4999) AS w
		ON CONFLICT DO NOTHING`)
	exec("message kinds' sequence", `SELECT setval(pg_get_serial_sequence('message_kinds', 'id'), (SELECT max(id) FROM message_kinds))`)
	exec("messages", `
		INSERT INTO task_message_logs (task_id, run, kinds, details)
		SELECT t.id, t.run, array_agg(k.id ORDER BY m.g), array_agg('at source.tex line ' || m.g ORDER BY m.g)
		FROM (SELECT g, (SELECT min(id) FROM tasks) + floor($1::int * random() ^ 2)::bigint AS tid,
		             random() AS r2, random() AS r3, random() AS r4
		      FROM generate_series(1, $2::int) AS g) AS m
		JOIN tasks t ON t.id = m.tid
		CROSS JOIN LATERAL (SELECT 1 + 60000 * CASE WHEN m.r2 < 0.5 THEN CASE t.status WHEN -1 THEN 0 WHEN -3 THEN 2
		                                                  WHEN -4 THEN 3 WHEN -5 THEN 4 ELSE 1 END ELSE 1 END
		                           + 5000 * floor(12 * m.r3 ^ 3)::int + floor(5000 * m.r4 ^ 4)::int AS id) AS k
		GROUP BY t.id, t.run`, tasks, messages-heavy)
	exec("one task's warnings", `
		INSERT INTO task_message_logs AS l (task_id, run, kinds, details)
		SELECT t.id, t.run, array_agg(1 + 60000 + 3 * 5000 + (g % 50) ORDER BY g), array_agg('line ' || g ORDER BY g)
		FROM (SELECT id, run FROM tasks WHERE corpus_id = $1 AND status = -2 ORDER BY id LIMIT 1) AS t,
		     generate_series(1, $2::int) AS g
		GROUP BY t.id, t.run
		ON CONFLICT (task_id, run) DO UPDATE SET kinds = l.kinds || excluded.kinds, details = l.details || excluded.details`,
		sc.CorpusID, heavy)
	// Written behind the write paths' backs: noted for the report's fold (BenchmarkReport folds).
	exec("report notes", `INSERT INTO report_changes (task_id) SELECT id FROM tasks WHERE corpus_id = $1 AND status BETWEEN -5 AND -1`,
		sc.CorpusID)
	exec("vacuum analyze", `VACUUM ANALYZE tasks, runs, run_statuses, message_kinds, task_message_logs, report_changes`)
	b.Logf("generated %d tasks, %d messages in %s", tasks, messages, time.Since(start).Round(time.Second))
	var logBytes, kindBytes int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT pg_total_relation_size('task_message_logs'), pg_total_relation_size('message_kinds')`).Scan(&logBytes, &kindBytes))
	b.Logf("messages take %d MB (task_message_logs, all in: %.1f bytes a message) and the dictionary %d MB",
		logBytes>>20, float64(logBytes)/float64(messages), kindBytes>>20)
	return sc
}

// BenchmarkReport measures each report level, runs, and diff (the matrix and a cell's first
// page) on a generated arXiv-like corpus (reportBenchScale), reporting the p95 of the calls
// (run it with -benchtime 20x for the p95 over 20 warm calls; two calls warm each up).
//
//	CORTEXQ_REPORT_BENCH_SCALE=1 go test -run '^$' -bench BenchmarkReport -benchtime 20x -timeout 2h ./queue/reports
func BenchmarkReport(b *testing.B) {
	scale := reportBenchScale(b)
	ctx := context.Background()
	// $CORTEXQ_REPORT_BENCH_DSN: a database of one's own (migrated), where the corpus is
	// generated once and kept for the next runs.
	dsn := os.Getenv("CORTEXQ_REPORT_BENCH_DSN")
	if dsn == "" {
		dsn = queuetest.ConnString(b)
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(b, err)
	TuneReportPool(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	var sc queue.Scope
	err = pool.QueryRow(ctx, `SELECT c.id, s.id FROM corpora c, services s WHERE c.name = 'arxiv' AND s.name = 'tex_to_html'`).
		Scan(&sc.CorpusID, &sc.ServiceID)
	if err != nil {
		sc = generateReportCorpus(b, pool, int(1_000_000*scale), int(10_000_000*scale))
	}
	var have int
	require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE corpus_id = $1`, sc.CorpusID).Scan(&have))
	require.Positive(b, have, "corpus arxiv has no tasks: a generation that failed? Start from an empty database")
	store := New(pool, nil, nil)
	// The category and what levels read the rollups: fold what is noted (the whole corpus,
	// after a generation) first.
	// $CORTEXQ_REPORT_BENCH_FOLD=0 skips it: the levels are then measured on the rollups as a
	// fold cut short left them (on a shared machine, the first fold at full scale may not fit).
	t0 := time.Now()
	var fold FoldSummary
	if os.Getenv("CORTEXQ_REPORT_BENCH_FOLD") != "0" {
		fold, err = store.FoldAll(ctx, 0)
		require.NoError(b, err)
	}
	if fold.Tasks > 0 {
		fmt.Fprintf(os.Stderr, "report bench (scale %g): folded %d tasks in %s\n", scale, fold.Tasks, time.Since(t0).Round(time.Millisecond))
	}
	_, err = pool.Exec(ctx, `VACUUM ANALYZE report_folded, report_rollup, report_all_rollup`)
	require.NoError(b, err)
	for _, rel := range []string{"task_message_logs", "message_kinds", "report_folded", "report_folded_kinds", "report_folded_scope",
		"report_rollup", "report_all_rollup"} {
		var size int64
		require.NoError(b, pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, rel).Scan(&size))
		fmt.Fprintf(os.Stderr, "report bench (scale %g): %-20s %8.1f MB all in\n", scale, rel, float64(size)/(1<<20))
	}

	// The largest category and what of Error, and the largest cell of the diff.
	errSlice := Slice{Scope: sc, Status: queue.StatusError, Severity: queue.SeverityError, Limit: 100}
	cats, _, err := store.ReportCategories(ctx, errSlice)
	require.NoError(b, err)
	require.NotEmpty(b, cats)
	errSlice.Category = cats[0].Name
	whats, _, err := store.ReportWhats(ctx, errSlice)
	require.NoError(b, err)
	require.NotEmpty(b, whats)
	warnSlice := Slice{Scope: sc, Status: queue.StatusWarning, Severity: queue.SeverityWarning, Limit: 100}
	fatalSlice := Slice{Scope: sc, Status: queue.StatusFatal, Severity: queue.SeverityFatal, Limit: 100}
	runs, err := store.Runs(ctx, sc)
	require.NoError(b, err)
	require.Len(b, runs, 5)
	current := DiffRuns{Scope: sc, From: runs[3].ID}
	closed := DiffRuns{Scope: sc, From: runs[0].ID, To: runs[3].ID}
	errStatus, warnStatus, invalidStatus, npStatus := queue.StatusError, queue.StatusWarning, queue.StatusInvalid, queue.StatusNoProblem

	cases := []struct {
		name string
		call func() error
	}{
		{"severities", func() error { _, err := store.ReportStatuses(ctx, sc); return err }},
		{"categories_error", func() error { _, _, err := store.ReportCategories(ctx, errSlice); return err }},
		{"categories_warning", func() error { _, _, err := store.ReportCategories(ctx, warnSlice); return err }},
		{"whats_error_top_category", func() error { _, _, err := store.ReportWhats(ctx, errSlice); return err }},
		{"messages_error_top_what", func() error {
			s := errSlice
			s.What = whats[0].Name
			_, err := store.ReportMessages(ctx, s)
			return err
		}},
		{"messages_error_rare_what", func() error { // the 100th what of the category (the GIN path)
			s := errSlice
			s.What = whats[len(whats)-1].Name
			_, err := store.ReportMessages(ctx, s)
			return err
		}},
		{"messages_error_top_what_page_50", func() error {
			s := errSlice
			s.What, s.Offset = whats[0].Name, 5000
			_, err := store.ReportMessages(ctx, s)
			return err
		}},
		{"categories_fatal", func() error { _, _, err := store.ReportCategories(ctx, fatalSlice); return err }},
		{"whats_warning_expected", func() error {
			s := warnSlice
			s.Category = "expected" // the category of the task with a tenth of the messages
			_, _, err := store.ReportWhats(ctx, s)
			return err
		}},
		{"messages_warning_heavy_what", func() error {
			s := warnSlice
			s.Category, s.What = "expected", "w1" // one of the heavy task's whats
			_, err := store.ReportMessages(ctx, s)
			return err
		}},
		{"messages_warning_heavy_what_deep", func() error { // 15,000 of the heavy task's 20,000 of the what
			s := warnSlice
			s.Category, s.What, s.Offset = "expected", "w1", 15000
			_, err := store.ReportMessages(ctx, s)
			return err
		}},
		{"all_severities", func() error { _, err := store.ReportAllSeverities(ctx, sc); return err }},
		{"all_categories_info", func() error {
			_, _, err := store.ReportAllNames(ctx, Slice{Scope: sc, Severity: queue.SeverityInfo, Limit: 100})
			return err
		}},
		{"all_categories_warning", func() error {
			_, _, err := store.ReportAllNames(ctx, Slice{Scope: sc, Severity: queue.SeverityWarning, Limit: 100})
			return err
		}},
		{"all_whats_warning_expected", func() error {
			_, _, err := store.ReportAllNames(ctx, Slice{Scope: sc, Severity: queue.SeverityWarning, Category: "expected", Limit: 100})
			return err
		}},
		{"all_messages_error_top_what", func() error {
			s := errSlice
			s.What = whats[0].Name
			_, err := store.ReportAllMessages(ctx, s)
			return err
		}},
		{"all_messages_warning_heavy_what", func() error {
			s := warnSlice
			s.Category, s.What = "expected", "w1"
			_, err := store.ReportAllMessages(ctx, s)
			return err
		}},
		{"runs", func() error { _, err := store.Runs(ctx, sc); return err }},
		{"diff_matrix_current", func() error { _, err := store.DiffMatrix(ctx, current); return err }},
		{"diff_matrix_closed", func() error { _, err := store.DiffMatrix(ctx, closed); return err }},
		{"diff_cell_current", func() error {
			_, err := store.DiffCellTasks(ctx, current, &errStatus, queue.StatusError, 100, 0)
			return err
		}},
		{"diff_cell_current_rare", func() error { // warning → blocked: 1% of the tasks
			_, err := store.DiffCellTasks(ctx, current, &warnStatus, queue.StatusBlocked, 100, 0)
			return err
		}},
		{"diff_cell_current_same_rare", func() error { // invalid → invalid: 1% of the tasks
			_, err := store.DiffCellTasks(ctx, current, &invalidStatus, queue.StatusInvalid, 100, 0)
			return err
		}},
		{"diff_cell_current_empty", func() error { // no_problem → error: none
			_, err := store.DiffCellTasks(ctx, current, &npStatus, queue.StatusError, 100, 0)
			return err
		}},
		{"diff_cell_closed", func() error {
			_, err := store.DiffCellTasks(ctx, closed, &errStatus, queue.StatusError, 100, 0)
			return err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for range 2 {
				require.NoError(b, c.call())
			}
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				require.NoError(b, c.call())
				took = append(took, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(took)
			p95 := took[min(len(took)-1, (len(took)*95+99)/100-1)]
			b.ReportMetric(float64(p95.Microseconds())/1000, "p95_ms")
			b.ReportMetric(0, "ns/op")
			fmt.Fprintf(os.Stderr, "report bench (scale %g): %-26s p95 %8.1f ms over %d calls\n", scale, c.name, float64(p95.Microseconds())/1000, len(took))
		})
	}
}
