package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/testfactory"
)

// whyRig is a corpus c with TODO tasks of service echo that nothing holds back: a worker asked
// a second ago, the reaper passed and the fold ran a second ago. Each case breaks one thing.
type whyRig struct {
	ctx  context.Context
	pool *pgxpool.Pool
	opts inspect.WhyOptions
	now  time.Time
}

func newWhyRig(t *testing.T) *whyRig {
	t.Helper()
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	svc := testfactory.Service(ctx, t, pool, nil)
	c := testfactory.Corpus(ctx, t, pool, &testfactory.CorpusOpts{Name: "c"})
	for range 3 {
		testfactory.Task(ctx, t, pool, &testfactory.TaskOpts{ServiceID: svc.ID, CorpusID: c.ID})
	}
	r := &whyRig{ctx: ctx, pool: pool, now: testfactory.DBNow(ctx, t, pool),
		opts: inspect.WhyOptions{Corpus: "c", Service: svc.Name, CorpusID: c.ID, ServiceID: svc.ID,
			WorkerCap: 2, ReapInterval: 10 * time.Second, FoldInterval: 10 * time.Second}}
	r.exec(t, `INSERT INTO workers (name, service_id, first_seen, last_request) VALUES ('w1', $1, now(), now() - interval '1 second')`, svc.ID)
	r.exec(t, `INSERT INTO reaper_passes (replica, at, requeued, dead_lettered, forgotten) VALUES ('r1', now() - interval '1 second', 0, 0, 0)`)
	r.exec(t, `UPDATE report_fold_state SET folded_at = now() - interval '1 second'`)
	r.exec(t, `INSERT INTO replica_heartbeats (replica, started_at, seen_at) VALUES ('r1', now(), now())`)
	return r
}

func (r *whyRig) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := r.pool.Exec(r.ctx, sql, args...)
	require.NoError(t, err, sql)
}

func (r *whyRig) causes(t *testing.T) []inspect.Cause {
	t.Helper()
	reasons, err := inspect.New(r.pool, nil).Why(r.ctx, r.opts)
	require.NoError(t, err)
	var out []inspect.Cause
	for _, re := range reasons {
		require.NotEmpty(t, re.Evidence, re.Cause)
		require.NotEmpty(t, re.Fix, re.Cause)
		out = append(out, re.Cause)
	}
	return out
}

// Why names each cause a corpus can be held back by, and only it.
func TestWhy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, r *whyRig)
		want  []inspect.Cause
	}{
		{"NothingHoldsItBack", func(*testing.T, *whyRig) {}, nil},
		{"Finished", func(t *testing.T, r *whyRig) { r.exec(t, `UPDATE tasks SET status = -1`) },
			[]inspect.Cause{inspect.CauseFinished}},
		{"Paused", func(t *testing.T, r *whyRig) { r.exec(t, `UPDATE tasks SET status = -6`) },
			[]inspect.Cause{inspect.CausePaused}},
		{"StarvedByPriority", func(t *testing.T, r *whyRig) {
			d := testfactory.Corpus(r.ctx, t, r.pool, &testfactory.CorpusOpts{Name: "d"})
			testfactory.Task(r.ctx, t, r.pool, &testfactory.TaskOpts{ServiceID: r.opts.ServiceID, CorpusID: d.ID})
			r.exec(t, `UPDATE corpus_shares SET priority = 5 WHERE corpus_id = $1`, d.ID)
		}, []inspect.Cause{inspect.CausePriority}},
		{"StarvedByWeight", func(t *testing.T, r *whyRig) {
			d := testfactory.Corpus(r.ctx, t, r.pool, &testfactory.CorpusOpts{Name: "d"})
			testfactory.Task(r.ctx, t, r.pool, &testfactory.TaskOpts{ServiceID: r.opts.ServiceID, CorpusID: d.ID})
			r.exec(t, `UPDATE corpus_shares SET weight = 100 WHERE corpus_id = $1`, d.ID)
		}, []inspect.Cause{inspect.CauseWeight}},
		{"NoWorkerAskedInTheLastMinute", func(t *testing.T, r *whyRig) {
			r.exec(t, `UPDATE workers SET last_request = now() - interval '2 minutes'`)
		}, []inspect.Cause{inspect.CauseNoWorkers}},
		{"WorkersAtTheirCap", func(t *testing.T, r *whyRig) {
			for range 2 {
				testfactory.Leased(r.ctx, t, r.pool, &testfactory.LeasedOpts{ServiceID: r.opts.ServiceID,
					CorpusID: r.opts.CorpusID, Workers: []string{"w1"}, LeasedAt: r.now})
			}
		}, []inspect.Cause{inspect.CauseWorkersAtCap}},
		{"NoReaperLeader", func(t *testing.T, r *whyRig) {
			testfactory.Leased(r.ctx, t, r.pool, &testfactory.LeasedOpts{ServiceID: r.opts.ServiceID,
				CorpusID: r.opts.CorpusID, Workers: []string{"w2"}, LeasedAt: r.now})
			r.exec(t, `UPDATE reaper_passes SET at = now() - interval '5 minutes'`)
		}, []inspect.Cause{inspect.CauseNoReaper}},
		{"NoFoldLeader", func(t *testing.T, r *whyRig) {
			r.exec(t, `INSERT INTO report_changes (task_id) SELECT id FROM tasks`)
			r.exec(t, `UPDATE report_fold_state SET folded_at = now() - interval '5 minutes'`)
		}, []inspect.Cause{inspect.CauseNoFold}},
		{"DeadLettersPilingUp", func(t *testing.T, r *whyRig) {
			r.exec(t, `INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, outcome)
				SELECT id, 1, 0, 'w1', 'r1', now() - interval '10 minutes', 'dead_lettered' FROM tasks`)
		}, []inspect.Cause{inspect.CauseDeadLetters}},
		{"DatabaseUnreachableFromAReplica", func(t *testing.T, r *whyRig) {
			r.exec(t, `INSERT INTO replica_heartbeats (replica, started_at, seen_at) VALUES ('r2', now() - interval '1 hour', now() - interval '5 minutes'),
				('r3', now() - interval '1 hour', now() - interval '5 minutes')`)
			r.exec(t, `UPDATE replica_heartbeats SET stopped = true WHERE replica = 'r3'`) // stopped cleanly: not a cause
		}, []inspect.Cause{inspect.CauseReplicaGone}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newWhyRig(t)
			tc.setup(t, r)
			require.Equal(t, tc.want, r.causes(t))
		})
	}
}
