package lease

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/procstat"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// benchStore is a store on a fresh database with one corpus and service, its connections set up
// as a replica's are (TunePool).
func benchStore(b *testing.B) (*Store, int32, int32) {
	b.Helper()
	ctx := context.Background()
	pool := tunedPool(b)
	q := dbsqlc.New(pool)
	corpus, err := q.CorpusCreate(ctx, "corpus", "/corpus", nil)
	require.NoError(b, err)
	svc, err := q.ServiceCreate(ctx, "echo", nil)
	require.NoError(b, err)
	return New(pool, Config{Replica: "bench"}), corpus.ID, svc.ID
}

// analyzeEvery is how many batches pass between the benchmarks' VACUUM ANALYZE runs.
const analyzeEvery = 200

// vacuumAnalyze does autovacuum's part, off the clock (a benchmark is shorter than its naptime).
// Statistics taken when every task was TODO and dispatch empty make the planner walk the primary
// key past the leased tasks instead of tasks_todo, and seq-scan dispatch; fresh ones make it use
// the indexes, as it does in a long-running deployment.
func vacuumAnalyze(b *testing.B, store *Store) {
	b.Helper()
	_, err := store.Pool().Exec(context.Background(), `VACUUM ANALYZE tasks, dispatch, attempts, task_messages, workers`)
	require.NoError(b, err)
}

// BenchmarkLeaseBatch leases the tasks of 4 workers (a bench's usual batch) and of 64 per
// transaction, from a large TODO pool.
func BenchmarkLeaseBatch(b *testing.B) {
	for _, batch := range []int{4, 64} {
		b.Run(fmt.Sprint(batch), func(b *testing.B) { benchmarkLease(b, batch) })
	}
}

func benchmarkLease(b *testing.B, batch int) {
	ctx := context.Background()
	store, corpus, svc := benchStore(b)
	_, err := store.Pool().Exec(ctx, `INSERT INTO tasks (service_id, corpus_id, entry)
		SELECT $1, $2, '/corpus/' || g || '/source.zip' FROM generate_series(1, $3::int) AS g`,
		svc, corpus, max(100_000, (b.N+analyzeEvery+1)*batch))
	require.NoError(b, err)
	vacuumAnalyze(b, store)
	workers := make([]string, batch)
	for i := range workers {
		workers[i] = fmt.Sprintf("w%02d", i)
	}
	req := LeaseRequest{ServiceID: svc, Workers: workers}
	// Warm up off the clock, so the statistics show a pool being leased.
	for range analyzeEvery {
		_, err := store.Lease(ctx, req)
		require.NoError(b, err)
	}
	vacuumAnalyze(b, store)
	var cpu machineCPU
	b.ResetTimer()
	cpu.start()
	for i := range b.N {
		if i > 0 && i%analyzeEvery == 0 {
			cpu.offClock(b, func() { vacuumAnalyze(b, store) })
		}
		leases, err := store.Lease(ctx, req)
		if err != nil || len(leases) != batch {
			b.Fatalf("lease: %d leases, %v", len(leases), err)
		}
	}
	b.StopTimer()
	cpu.stop()
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tasks/s")
	cpu.report(b)
}

// machineCPU adds up the CPU time the whole machine (this process and PostgreSQL's) spent
// between start and stop (procstat.Machine, which leaves out steal: on shared machines that can
// swing the time per operation twofold between runs).
type machineCPU struct {
	seconds, from float64
	unknown       bool // /proc/stat could not be read at some point
}

func (m *machineCPU) start() {
	var ok bool
	m.from, ok = procstat.Machine()
	m.unknown = m.unknown || !ok
}

func (m *machineCPU) stop() {
	now, ok := procstat.Machine()
	m.unknown = m.unknown || !ok
	m.seconds += now - m.from
}

// offClock runs fn with both the benchmark's timer and m stopped.
func (m *machineCPU) offClock(b *testing.B, fn func()) {
	b.StopTimer()
	m.stop()
	fn()
	m.start()
	b.StartTimer()
}

// report adds the machine's CPU time per operation (in steps of 10 ms over the whole run).
func (m *machineCPU) report(b *testing.B) {
	if !m.unknown {
		b.ReportMetric(m.seconds*1e6/float64(b.N), "machine-cpu-µs/op")
	}
}

// BenchmarkClaimBatch claims 12 results and 128 per transaction, each with a few messages; and,
// as a replica's claims of a bench's NoProblem results come, batches of 1 to 24 results (12.5 on
// average) without messages.
func BenchmarkClaimBatch(b *testing.B) {
	for _, batch := range []int{12, 128} {
		b.Run(fmt.Sprint(batch), func(b *testing.B) { benchmarkClaim(b, batch, true) })
	}
	b.Run("1to24-no-messages", func(b *testing.B) { benchmarkClaim(b, 24, false) })
}

// benchmarkClaim claims batch results per transaction, with messages; without, it claims 1 to
// batch results, a different number in each of batch transactions in a row.
func benchmarkClaim(b *testing.B, batch int, withMessages bool) {
	ctx := context.Background()
	store, corpus, svc := benchStore(b)
	pool := store.Pool()
	// b.N batches of tasks in flight, leased to w0…w127 (the setup leases in bulk SQL: Lease
	// has its own benchmark).
	_, err := pool.Exec(ctx, `
		WITH t AS (
			INSERT INTO tasks (service_id, corpus_id, entry, status)
			SELECT $1, $2, '/corpus/' || g || '/source.zip', 1 FROM generate_series(1, $3::int) AS g
			RETURNING id
		), d AS (
			INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, replica, service_id, lease_timeout_seconds, leased_at)
			SELECT id, 1, 'in_flight', ARRAY['w' || (id % $4)], now() + interval '1 hour', 'bench', $1, 3600, now() FROM t
		)
		INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at)
		SELECT id, 1, 0, 'w' || (id % $4), 'bench', now() FROM t`,
		svc, corpus, b.N*batch, batch)
	require.NoError(b, err)
	vacuumAnalyze(b, store)
	rows, err := pool.Query(ctx, `SELECT id FROM tasks ORDER BY id`)
	require.NoError(b, err)
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(b, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(b, rows.Err())
	require.Len(b, ids, b.N*batch)
	msgs := []queue.Message{
		{Severity: queue.SeverityWarning, Category: "latexml", What: "missing_file", Details: "figure.png"},
		{Severity: queue.SeverityInfo, Category: "latexml", What: "math", Details: "42 formulae"},
		{Severity: queue.SeverityInfo, Category: "conversion", What: "1", Details: "status 1"},
	}
	status := queue.StatusWarning
	if !withMessages {
		msgs, status = nil, queue.StatusNoProblem
	}
	results := make([]Result, batch)
	claimed := 0
	var cpu machineCPU
	b.ResetTimer()
	cpu.start()
	for i := range b.N {
		if i > 0 && i%analyzeEvery == 0 {
			cpu.offClock(b, func() { vacuumAnalyze(b, store) })
		}
		n := batch
		if !withMessages {
			n = 1 + i*7%batch // 7 and 24 are coprime: every size from 1 to 24 in turn
		}
		for j := range n {
			id := ids[i*batch+j]
			results[j] = Result{TaskID: id, Worker: fmt.Sprintf("w%d", id%int64(batch)), ServiceID: svc,
				Kind: KindReport, Status: status, Messages: msgs}
		}
		claimed += n
		ds, err := store.Claim(ctx, results[:n], nil)
		if err != nil {
			b.Fatalf("claim: %v", err)
		}
		for _, d := range ds {
			if d.Outcome != OutcomeAccepted {
				b.Fatalf("task %d: %s (%s)", d.TaskID, d.Outcome, d.Reason)
			}
		}
	}
	b.StopTimer()
	cpu.stop()
	b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "results/s")
	cpu.report(b)
}
