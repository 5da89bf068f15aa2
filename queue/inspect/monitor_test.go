package inspect_test

import (
	"context"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/leasetest"
)

// TestMonitor reads what the leader exports: tasks per status from the ledger (every status of a
// corpus with tasks, zeros included), the oldest TODO task's wait (from its import, then from a
// rerun), the workers heard from in the last minute per service, and the fold's state.
func TestMonitor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	cat := catalog.New(pool, nil)
	svc, err := cat.AddService(ctx, "echo", 0)
	require.NoError(t, err)
	_, err = cat.AddService(ctx, "idle", 0)
	require.NoError(t, err)
	imp, err := cat.Import(ctx, catalog.ImportRequest{Corpus: "c", CorpusPath: "/c", ServiceID: svc.ID,
		Entries: []string{"/c/1.zip", "/c/2.zip", "/c/3.zip"}})
	require.NoError(t, err)
	// The tasks waited an hour already.
	_, err = pool.Exec(ctx, "UPDATE tasks SET todo_since = now() - interval '1 hour'")
	require.NoError(t, err)
	store := lease.New(pool, lease.Config{Replica: "r1"})
	leases, err := leasetest.Lease(ctx, store, leasetest.Request{ServiceID: svc.ID, Workers: []string{"w1", "w2"}})
	require.NoError(t, err)
	require.Len(t, leases, 2)
	ds, err := leasetest.Claim(ctx, store, []lease.Result{{TaskID: leases[0].TaskID, Worker: leases[0].Worker,
		Kind: lease.KindReport, Status: queue.StatusError}}, func(*lease.Decision) error { return nil })
	require.NoError(t, err)
	require.Equal(t, lease.OutcomeAccepted, ds[0].Outcome)

	// Two workers heard from within the minute, one two minutes ago.
	_, err = pool.Exec(ctx, `INSERT INTO workers (name, service_id, last_request, last_result) VALUES
		('w1', $1, now(), NULL), ('w2', $1, now() - interval '2 minutes', now() - interval '10 seconds'),
		('w3', $1, now() - interval '2 minutes', now() - interval '2 minutes')`, svc.ID)
	require.NoError(t, err)

	r := inspect.New(pool, nil)
	m, err := r.Monitor(ctx)
	require.NoError(t, err)
	counts := map[queue.Status]int64{}
	for _, tc := range m.Tasks {
		require.Equal(t, [2]string{"c", "echo"}, [2]string{tc.Corpus, tc.Service})
		counts[tc.Status] = tc.Tasks
	}
	require.Len(t, counts, len(inspect.MonitoredStatuses), "every status, zeros too")
	require.Equal(t, map[queue.Status]int64{queue.StatusTODO: 1, queue.StatusDispatched: 1, queue.StatusError: 1,
		queue.StatusNoProblem: 0, queue.StatusWarning: 0, queue.StatusFatal: 0, queue.StatusInvalid: 0, queue.StatusBlocked: 0}, counts)
	require.Len(t, m.OldestTodo, 1)
	require.InDelta(t, 3600, m.OldestTodo[0].Seconds, 120, "the TODO task waited an hour")
	require.Equal(t, map[string]int64{"echo": 2, "idle": 0}, m.Workers, "w1 asked and w2 answered within the minute")
	require.EqualValues(t, -1, m.FoldAgeSeconds, "never folded")

	// A rerun starts the wait again; the ledger, compacted or not, says the same.
	_, err = store.Rerun(ctx, lease.RerunScope{CorpusID: imp.CorpusID, ServiceID: svc.ID})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "WITH gone AS (DELETE FROM task_totals RETURNING *) INSERT INTO task_totals SELECT corpus_id, service_id, status, sum(tasks) FROM gone GROUP BY 1, 2, 3")
	require.NoError(t, err)
	m, err = r.Monitor(ctx)
	require.NoError(t, err)
	require.Less(t, m.OldestTodo[0].Seconds, 60.0, "rerun just now")
	todo := slices.IndexFunc(m.Tasks, func(tc inspect.TaskCount) bool { return tc.Status == queue.StatusTODO })
	require.EqualValues(t, 3, m.Tasks[todo].Tasks)

	// No River client leads this database.
	leader, err := r.IsLeader(ctx, "anyone")
	require.NoError(t, err)
	require.False(t, leader)
}

// BenchmarkMonitorMillionTasks measures a scrape's reads on the leader (Monitor and IsLeader) at
// a million tasks in 20 corpora, a third of them TODO, with 2,000 uncompacted ledger rows and
// 1,000 workers (docs/monitoring.md#cost-to-the-database).
func BenchmarkMonitorMillionTasks(b *testing.B) {
	ctx := context.Background()
	pool := queuetest.NewPool(b)
	millionTasks(b, pool)
	r := inspect.New(pool, nil)
	var took []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, err := r.IsLeader(ctx, "x"); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Monitor(ctx); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms")
	b.StopTimer()
	reportExecutionTimes(b, pool)
}

// reportExecutionTimes reports the database's own time for each query of sql/metrics.sql
// (EXPLAIN ANALYZE's execution time, the median of 21 runs) and their sum, without the round
// trips.
func reportExecutionTimes(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	ctx := context.Background()
	text, err := os.ReadFile("../../sql/metrics.sql")
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, part := range strings.Split(string(text), "-- name: ")[1:] {
		name, query := strings.Fields(part)[0], part[strings.Index(part, "\n"):]
		var ms []float64
		for range 21 {
			var plan []map[string]any
			if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query).Scan(&plan); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			ms = append(ms, plan[0]["Execution Time"].(float64)+plan[0]["Planning Time"].(float64))
		}
		sort.Float64s(ms)
		b.Logf("%s: %.3f ms (planning and execution, median of 21)", name, ms[10])
		total += ms[10]
	}
	b.ReportMetric(total, "db-ms")
}

// millionTasks fills the database of a benchmark: a million tasks (every third TODO, the rest
// spread over the finished statuses), the ledger they leave plus 2,000 rows a busy fold interval
// appends, 1,000 workers, and the statistics of it all.
func millionTasks(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	ctx := context.Background()
	for _, q := range []string{
		"INSERT INTO services (name) VALUES ('tex_to_html'), ('idle')",
		"INSERT INTO corpora (name, path) SELECT 'corpus' || g, '/corpora/' || g FROM generate_series(1, 20) g",
		`INSERT INTO tasks (corpus_id, service_id, entry, status, todo_since)
		 SELECT c.id, s.id, 'e/' || g, CASE WHEN g % 3 = 0 THEN 0 ELSE -1 - (g % 5) END,
		        now() - (g % 7200) * interval '1 second'
		 FROM generate_series(1, 1000000) g
		 JOIN corpora c ON c.name = 'corpus' || (1 + g % 20)
		 JOIN services s ON s.name = 'tex_to_html'`,
		`INSERT INTO task_totals (corpus_id, service_id, status, tasks)
		 SELECT 1 + g % 20, (SELECT id FROM services WHERE name = 'tex_to_html'), -1, CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END
		 FROM generate_series(1, 2000) g`,
		`INSERT INTO workers (name, service_id, last_request, last_result)
		 SELECT 'w' || g, (SELECT id FROM services WHERE name = 'tex_to_html'), now() - g * interval '100 ms', now()
		 FROM generate_series(1, 1000) g`,
		"DELETE FROM report_changes",
		"VACUUM ANALYZE tasks",
		"VACUUM ANALYZE task_totals",
		"VACUUM ANALYZE workers",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
}
