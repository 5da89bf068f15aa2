package lease

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// The concurrency run: replicas on one database, each with its own pool, leasers and reaper.
const (
	concReplicas = 4
	concTasks    = 10_000
	concLeasers  = 2  // leasing goroutines per replica
	concBatch    = 16 // workers asking in one Lease call
	// concLease is the service's lease: short, so leases that are never answered expire while
	// the run goes on, and the reapers retry and dead-letter them.
	concLease    = time.Second
	concDeadline = 120 * time.Second
)

// fate is what the worker of one attempt does with its task.
type fate int

const (
	fateNoProblem fate = iota // answers at once with a usable result
	fateFatal                 // answers at once with a Fatal verdict
	fateRetryable             // answers at once with a retryable cause (Defer)
	fateUnusable              // answers at once with an unusable archive
	fateLate                  // answers NoProblem only after its lease has expired
	fateLost                  // never answers
)

// fateOf decides an attempt's fate from its identity, so a task's retries meet other fates.
func fateOf(task int64, run int32, attempt int) fate {
	x := uint64(task)*0x9e3779b97f4a7c15 ^ uint64(run)<<32 ^ uint64(attempt)<<48
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	switch p := x % 100; {
	case p < 70:
		return fateNoProblem
	case p < 75:
		return fateFatal
	case p < 81:
		return fateRetryable
	case p < 86:
		return fateUnusable
	case p < 92:
		return fateLate
	default:
		return fateLost
	}
}

type attemptID struct {
	task    int64
	run     int32
	attempt int
}

// lateResult is a result held back until after its lease's deadline.
type lateResult struct {
	result Result
	due    time.Time
}

// concRun is the shared state of the concurrency run.
type concRun struct {
	t      *testing.T
	ctx    context.Context
	svc    int32
	stores []*Store
	stop   atomic.Bool
	leased sync.Map // attemptID → worker
	leases atomic.Int64
	// Tallies for the log.
	retries  atomic.Int64
	outcomes sync.Map // Outcome → *atomic.Int64
	reaped   [3]atomic.Int64
}

func (c *concRun) count(o Outcome) {
	v, _ := c.outcomes.LoadOrStore(o, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// leaser is one replica goroutine standing for concBatch workers: it leases for the idle ones,
// answers each lease as its fate says, and claims the answers in one batch through some
// replica (results reach any replica's sink).
func (c *concRun) leaser(replica, g int) {
	store := c.stores[replica]
	workers := make([]string, concBatch)
	for i := range workers {
		workers[i] = fmt.Sprintf("r%d.g%d.w%02d", replica, g, i)
	}
	var late []lateResult
	for iter := 0; ; iter++ {
		stopping := c.stop.Load()
		var results []Result
		kept := late[:0]
		for _, l := range late {
			if stopping || time.Now().After(l.due) {
				results = append(results, l.result)
			} else {
				kept = append(kept, l)
			}
		}
		late = kept
		var leases []Lease
		if !stopping {
			var err error
			leases, err = store.Lease(c.ctx, LeaseRequest{ServiceID: c.svc, LeaseTimeout: concLease, Workers: workers})
			if err != nil {
				c.t.Errorf("replica %d: lease: %v", replica, err)
				return
			}
		}
		for _, l := range leases {
			id := attemptID{l.TaskID, l.Run, l.Attempt}
			if prev, dup := c.leased.LoadOrStore(id, l.Worker); dup {
				c.t.Errorf("task %d run %d attempt %d leased twice: to %s and %s", l.TaskID, l.Run, l.Attempt, prev, l.Worker)
			}
			c.leases.Add(1)
			if l.Retry {
				c.retries.Add(1)
			}
			r := Result{TaskID: l.TaskID, Worker: l.Worker, ServiceID: c.svc, Kind: KindReport, Status: queue.StatusNoProblem,
				Messages: []queue.Message{{Severity: queue.SeverityInfo, Category: "conversion", What: "done"}}}
			switch fateOf(l.TaskID, l.Run, l.Attempt) {
			case fateNoProblem:
			case fateFatal:
				r.Status = queue.StatusFatal
				r.Messages = []queue.Message{{Severity: queue.SeverityFatal, Category: "latexml", What: "broken"}}
			case fateRetryable:
				r.Kind, r.Status, r.Messages = KindRetryable, queue.StatusFatal, timeoutCause()
			case fateUnusable:
				r = Result{TaskID: l.TaskID, Worker: l.Worker, ServiceID: c.svc, Kind: KindUnusable}
			case fateLate:
				late = append(late, lateResult{r, l.Deadline.Add(100 * time.Millisecond)})
				continue
			case fateLost:
				continue
			}
			results = append(results, r)
		}
		if len(results) > 0 {
			ds, err := c.stores[(replica+g+iter)%concReplicas].Claim(c.ctx, results, nil)
			if err != nil {
				c.t.Errorf("replica %d: claim: %v", replica, err)
				return
			}
			for _, d := range ds {
				c.count(d.Outcome)
				if d.Late != LateNone {
					c.count(Outcome("late_" + string(d.Late)))
				}
			}
		}
		if stopping {
			return
		}
		if len(leases) == 0 {
			time.Sleep(20 * time.Millisecond) // nothing to lease now: poll again shortly
		}
	}
}

// reaper runs a replica's reaping pass over and over, as the periodic job would.
func (c *concRun) reaper(replica int) {
	for !c.stop.Load() {
		sum, err := c.stores[replica].ReapAll(c.ctx)
		if err != nil {
			c.t.Errorf("replica %d: reap: %v", replica, err)
			return
		}
		c.reaped[0].Add(int64(sum.Requeued))
		c.reaped[1].Add(int64(sum.DeadLettered))
		c.reaped[2].Add(int64(sum.Forgotten))
		time.Sleep(50 * time.Millisecond)
	}
}

func TestConcurrency(t *testing.T) {
	t.Run("FourReplicasLeaseClaimAndReap", func(t *testing.T) {
		ctx := context.Background()
		dsn := queuetest.NewDB(t)
		c := &concRun{t: t, ctx: ctx}
		var pools []*pgxpool.Pool
		for i := range concReplicas {
			cfg, err := pgxpool.ParseConfig(dsn)
			require.NoError(t, err)
			cfg.MaxConns = concLeasers + 2
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close) // before the database is dropped
			pools = append(pools, pool)
			// The database clock: no NowFunc.
			c.stores = append(c.stores, New(pool, Config{Replica: fmt.Sprintf("replica-%d", i), LeaseTimeout: 2 * time.Second}))
		}
		db := pools[0]
		q := dbsqlc.New(db)
		corpus, err := q.CorpusCreate(ctx, "corpus", "/corpus", nil)
		require.NoError(t, err)
		secs := int32(concLease / time.Second)
		svc, err := q.ServiceCreate(ctx, "echo", &secs)
		require.NoError(t, err)
		c.svc = svc.ID
		_, err = db.Exec(ctx, `INSERT INTO tasks (service_id, corpus_id, entry)
			SELECT $1, $2, '/corpus/' || g || '/source.zip' FROM generate_series(1, $3::int) AS g`,
			svc.ID, corpus.ID, concTasks)
		require.NoError(t, err)

		start := time.Now()
		var wg sync.WaitGroup
		for r := range concReplicas {
			for g := range concLeasers {
				wg.Go(func() { c.leaser(r, g) })
			}
			wg.Go(func() { c.reaper(r) })
		}
		// Wait until every task is finished and nothing is in flight or queued.
		var open, inFlight, queued int
		for {
			err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM tasks WHERE status >= 0),
				(SELECT count(*) FROM dispatch WHERE state = 'in_flight'),
				(SELECT count(*) FROM dispatch WHERE queued)`).Scan(&open, &inFlight, &queued)
			if err != nil || open+inFlight+queued == 0 || time.Since(start) > concDeadline || t.Failed() {
				require.NoError(t, err)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		c.stop.Store(true)
		wg.Wait()
		elapsed := time.Since(start)
		require.False(t, t.Failed(), "the replicas reported errors")
		require.Zero(t, open+inFlight+queued, "after %v: %d tasks open, %d rows in flight, %d queued", elapsed, open, inFlight, queued)

		var tallies []string
		c.outcomes.Range(func(k, v any) bool {
			tallies = append(tallies, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
			return true
		})
		slices.Sort(tallies)
		t.Logf("%v: %d leases (%d retries), outcomes %v, reaped requeued=%d dead_lettered=%d forgotten=%d",
			elapsed.Round(time.Millisecond), c.leases.Load(), c.retries.Load(), tallies,
			c.reaped[0].Load(), c.reaped[1].Load(), c.reaped[2].Load())

		// No task lost, every one finished.
		var total, finished int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status BETWEEN -5 AND -1) FROM tasks`).Scan(&total, &finished))
		require.Equal(t, concTasks, total)
		require.Equal(t, concTasks, finished, "every task is terminal")
		var inFlightRows, queuedRows int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'in_flight'), count(*) FILTER (WHERE queued) FROM dispatch`).Scan(&inFlightRows, &queuedRows))
		require.Zero(t, inFlightRows, "no row in flight")
		require.Zero(t, queuedRows, "no retry queued")

		// The attempts table is exactly the leases handed out.
		rows, err := db.Query(ctx, `SELECT task_id, run, attempt, worker FROM attempts`)
		require.NoError(t, err)
		recorded := 0
		for rows.Next() {
			var id attemptID
			var worker string
			var attempt int32
			require.NoError(t, rows.Scan(&id.task, &id.run, &attempt, &worker))
			id.attempt = int(attempt)
			w, ok := c.leased.Load(id)
			require.True(t, ok, "attempt %+v was never handed out", id)
			require.Equal(t, w, worker, "attempt %+v", id)
			recorded++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, int(c.leases.Load()), recorded, "one attempts row per lease")

		var untouched, maxAttempts int
		require.NoError(t, db.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.task_id = t.id)),
			(SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM attempts GROUP BY task_id, run) AS per_run)`).
			Scan(&untouched, &maxAttempts))
		require.Zero(t, untouched, "every task was leased")
		require.LessOrEqual(t, maxAttempts, queue.MaxDispatchRetries+2, "no run outlives its retry budget")

		bad, err := violations(ctx, db, loadInvariants(t))
		require.NoError(t, err)
		require.Empty(t, bad, "invariants")
	})
}
