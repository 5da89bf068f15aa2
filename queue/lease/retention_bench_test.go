package lease

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// pruneBenchTasks is how many tasks BenchmarkPrune generates: $CORTEXQ_PRUNE_BENCH_TASKS, 20,000
// by default.
func pruneBenchTasks(b *testing.B) int {
	s := os.Getenv("CORTEXQ_PRUNE_BENCH_TASKS")
	if s == "" {
		return 20_000
	}
	n, err := strconv.Atoi(s)
	require.NoError(b, err, "CORTEXQ_PRUNE_BENCH_TASKS")
	require.True(b, n > 0 && n <= 5_000_000, "CORTEXQ_PRUNE_BENCH_TASKS: want 1 to 5,000,000")
	return n
}

// generateHistory fills a fresh database, in set-based statements, with tasks tasks of one
// corpus and service over 5 runs a day apart (4 closed, with their statuses in run_statuses, and
// the current one): each task has one attempt per run (a tenth of them a second one) and one
// message log per run of 8 messages.
func generateHistory(b *testing.B, pool *pgxpool.Pool, corpus, svc int32, tasks int) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	var took []string
	exec := func(what, sql string, args ...any) {
		b.Helper()
		t0 := time.Now()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(b, err, what)
		took = append(took, what+" "+time.Since(t0).Round(time.Millisecond).String())
	}
	exec("runs", `
		INSERT INTO runs (corpus_id, service_id, started_at, ended_at, note)
		SELECT $1, $2, now() - (6 - r) * interval '1 day',
		       CASE WHEN r < 5 THEN now() - (5 - r) * interval '1 day' END, 'run ' || r
		FROM generate_series(1, 5) AS r`, corpus, svc)
	exec("tasks", `
		INSERT INTO tasks (service_id, corpus_id, entry, status, run)
		SELECT $1, $2, '/corpus/' || g || '/source.zip', -1 - (g % 3), 5
		FROM generate_series(1, $3::int) AS g`, svc, corpus, tasks)
	exec("run_statuses", `
		INSERT INTO run_statuses (run_id, task_id, status)
		SELECT r.id, t.id, t.status FROM runs r CROSS JOIN tasks t WHERE r.ended_at IS NOT NULL`)
	exec("attempts", `
		INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, answered_at, outcome, status)
		SELECT t.id, r.id, a, 'w' || (t.id % 64), 'bench', r.started_at + (t.id % 3600) * interval '1 second',
		       r.started_at + (t.id % 3600) * interval '1 second' + interval '2 seconds',
		       CASE WHEN a = 0 AND t.id % 10 = 0 THEN 'expired' ELSE 'accepted' END, t.status
		FROM runs r CROSS JOIN tasks t, generate_series(0, CASE WHEN t.id % 10 = 0 THEN 1 ELSE 0 END) AS a`)
	exec("message kinds", `
		INSERT INTO message_kinds (severity, category, what)
		SELECT 'warning', 'c' || (g / 100), 'w' || g FROM generate_series(1, 1000) AS g
		ON CONFLICT DO NOTHING`)
	exec("message logs", `
		INSERT INTO task_message_logs (task_id, run, kinds, details)
		SELECT t.id, r.id, ARRAY(SELECT k.lo + (t.id * 7 + r.id) % 990 + g FROM generate_series(0, 7) AS g)::int[],
		       '{at source.tex line 1,line 2,line 3,line 4,line 5,line 6,line 7,line 8}'::text[]
		FROM runs r CROSS JOIN tasks t CROSS JOIN (SELECT min(id) AS lo FROM message_kinds) AS k`)
	exec("vacuum analyze", `VACUUM ANALYZE tasks, runs, run_statuses, attempts, task_message_logs`)
	b.Logf("generated %d tasks' history in %s (%s)", tasks, time.Since(start).Round(time.Second), strings.Join(took, ", "))
}

// BenchmarkPrune measures cortexq prune --keep 2 (PruneRuns) on a generated history
// (pruneBenchTasks tasks × 5 runs): the rows dropped a second, and the latency of claim-like
// write transactions (a task's status and a new attempt of its current run) run on the side,
// against the same transactions with no prune running.
//
//	CORTEXQ_PRUNE_BENCH_TASKS=500000 go test -run '^$' -bench BenchmarkPrune -benchtime 1x -timeout 2h ./queue/lease
func BenchmarkPrune(b *testing.B) {
	tasks := pruneBenchTasks(b)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		probe, corpus, svc := benchStore(b)
		generateHistory(b, probe.pool, corpus, svc, tasks)
		// The prune's own pool times each of its statements: the longest is the longest any row
		// lock of the prune is held.
		cfg, err := pgxpool.ParseConfig(probe.pool.Config().ConnString())
		require.NoError(b, err)
		stmts := &statementTimes{}
		cfg.ConnConfig.Tracer = stmts
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(b, err)
		store := New(pool, Config{Replica: "bench"})
		var before int64
		require.NoError(b, store.pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&before))
		idle := probeClaims(b, probe.pool, svc, tasks, 2*time.Second, nil)
		done := make(chan struct{})
		var during []time.Duration
		var wg sync.WaitGroup
		wg.Go(func() { during = probeClaims(b, probe.pool, svc, tasks, time.Hour, done) })
		b.StartTimer()
		t0 := time.Now()
		scopes, err := store.PruneRuns(ctx, PruneOptions{Keep: 2})
		took := time.Since(t0)
		b.StopTimer()
		close(done)
		wg.Wait()
		pool.Close()
		require.NoError(b, err)
		require.Len(b, scopes, 1)
		p := scopes[0]
		rows := p.RunStatuses + p.Attempts + p.MessageLogs + p.RunDiffs + int64(len(p.DroppedRuns))
		require.EqualValues(b, 3*tasks, p.RunStatuses)
		require.EqualValues(b, 3*tasks, p.MessageLogs)
		b.Logf("%d tasks (%d MB): dropped %d statuses, %d attempts, %d message logs of runs %v in %s: %.0f rows/s",
			tasks, before>>20, p.RunStatuses, p.Attempts, p.MessageLogs, p.DroppedRuns, took.Round(time.Millisecond),
			float64(rows)/took.Seconds())
		b.Logf("statements: %s", strings.Join(stmts.summary(), "; "))
		b.Logf("claim-like writes idle: %s; during the prune: %s", latencies(idle), latencies(during))
		b.ReportMetric(float64(rows)/took.Seconds(), "rows/s")
		b.ReportMetric(took.Seconds(), "s/prune")
		b.ReportMetric(float64(quantile(during, 0.99).Microseconds())/1000, "ms-p99-write")
		b.ReportMetric(float64(quantile(during, 1).Microseconds())/1000, "ms-max-write")
		b.ReportMetric(stmts.longest().Seconds(), "s-max-statement")
	}
}

// probeClaims runs claim-like write transactions on random tasks of svc, one after the other,
// for d or until done is closed, and returns their latencies.
func probeClaims(b *testing.B, pool *pgxpool.Pool, svc int32, tasks int, d time.Duration, done <-chan struct{}) []time.Duration {
	ctx := context.Background()
	var lat []time.Duration
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		select {
		case <-done:
			return lat
		default:
		}
		id := int64(1 + (i*7919)%tasks)
		t0 := time.Now()
		_, err := pool.Exec(ctx, `
			WITH t AS (UPDATE tasks SET status = -1 WHERE id = (SELECT min(id) FROM tasks) + $1 - 1 AND service_id = $2 RETURNING id, run)
			INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, answered_at, outcome, status)
			SELECT t.id, t.run, 100 + $3::int, 'probe', 'bench', now(), now(), 'accepted', -1 FROM t
			ON CONFLICT DO NOTHING`, id, svc, i)
		if err != nil {
			b.Errorf("probe write: %v", err)
			return lat
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

// quantile is the q-quantile of ds (q = 1: the largest).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func latencies(ds []time.Duration) string {
	return strconv.Itoa(len(ds)) + " writes, p50 " + quantile(ds, 0.5).Round(10*time.Microsecond).String() +
		", p99 " + quantile(ds, 0.99).Round(10*time.Microsecond).String() + ", max " + quantile(ds, 1).Round(10*time.Microsecond).String()
}

// statementTimes records how long each statement of a pool took, by its sqlc name.
type statementTimes struct {
	mu    sync.Mutex
	times map[string][]time.Duration
}

type statementStart struct{}

type statementKey struct {
	name string
	t0   time.Time
}

func (s *statementTimes) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	name, _, _ := strings.Cut(strings.TrimPrefix(data.SQL, "-- name: "), " ")
	return context.WithValue(ctx, statementStart{}, statementKey{name, time.Now()})
}

func (s *statementTimes) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	k, ok := ctx.Value(statementStart{}).(statementKey)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.times == nil {
		s.times = map[string][]time.Duration{}
	}
	s.times[k.name] = append(s.times[k.name], time.Since(k.t0))
}

// summary is one line per statement name: how many ran, their total, median and longest.
func (s *statementTimes) summary() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, ds := range s.times {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		out = append(out, name+": "+strconv.Itoa(len(ds))+" in "+sum.Round(time.Millisecond).String()+", median "+
			quantile(ds, 0.5).Round(time.Millisecond).String()+", longest "+quantile(ds, 1).Round(time.Millisecond).String())
	}
	slices.Sort(out)
	return out
}

// longest is the longest statement of all.
func (s *statementTimes) longest() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m time.Duration
	for _, ds := range s.times {
		m = max(m, quantile(ds, 1))
	}
	return m
}
