package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/queuetest"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

type countArgs struct {
	N     int64 `json:"n"`
	Block bool  `json:"block"` // wait for the context's end after the first step
}

// counter counts to N a step at a time, checkpointing each; it starts from its cursor.
func counter(gate chan struct{}) jobs.Op {
	return jobs.Define("count", func(a countArgs) error {
		if a.N < 0 {
			return errors.New("n: want >= 0")
		}
		return nil
	}, func(ctx context.Context, _ jobs.Env, a countArgs, p *jobs.Progress) (any, error) {
		var from int64
		if _, err := p.Cursor(&from); err != nil {
			return nil, err
		}
		p.Set(from, a.N)
		for i := from; i < a.N; i++ {
			if a.Block && i > from {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			p.Add(1)
			if err := p.Checkpoint(ctx, i+1); err != nil {
				return nil, err
			}
		}
		return map[string]int64{"from": from, "to": a.N}, nil
	})
}

func startRunner(t *testing.T, pool *pgxpool.Pool, reg *jobs.Registry) {
	t.Helper()
	r, err := jobs.NewRunner(jobs.Env{Base: base.New(pool, nil, nil)}, reg, jobs.Config{Beat: 100 * time.Millisecond, Name: "test"})
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(r.Stop)
}

func waitState(t *testing.T, pool *pgxpool.Pool, id int64, want string) jobs.Job {
	t.Helper()
	var j jobs.Job
	require.Eventually(t, func() bool {
		var err error
		j, err = jobs.Get(context.Background(), pool, id)
		require.NoError(t, err)
		return j.State == want
	}, 30*time.Second, 20*time.Millisecond, "job %d never %s", id, want)
	return j
}

func TestJobRunsToCompletion(t *testing.T) {
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	reg := jobs.NewRegistry(counter(nil))
	_, err := jobs.Enqueue(ctx, pool, reg, jobs.Request{Kind: "nope"})
	require.ErrorIs(t, err, jobs.ErrUnknownKind)
	_, err = jobs.Enqueue(ctx, pool, reg, jobs.Request{Kind: "count", Args: json.RawMessage(`{"n": -1}`)})
	require.ErrorContains(t, err, "want >= 0")
	_, err = jobs.Enqueue(ctx, pool, reg, jobs.Request{Kind: "count", Args: json.RawMessage(`{"m": 1}`)})
	require.ErrorContains(t, err, "unknown field")

	id, err := jobs.Enqueue(ctx, pool, reg, jobs.Request{Kind: "count", Args: json.RawMessage(`{"n": 7}`), Actor: "me", Surface: "api"})
	require.NoError(t, err)
	active, err := jobs.List(ctx, pool, true, 10)
	require.NoError(t, err)
	require.Len(t, active, 1)
	require.Equal(t, "queued", active[0].State)
	startRunner(t, pool, reg)
	j := waitState(t, pool, id, "completed")
	require.Equal(t, int64(7), j.Done)
	require.Equal(t, int64(7), j.Total)
	require.JSONEq(t, `{"from": 0, "to": 7}`, string(j.Result))
	require.Equal(t, "me", j.Actor)
	active, err = jobs.List(ctx, pool, true, 10)
	require.NoError(t, err)
	require.Empty(t, active)
}

func TestJobCancel(t *testing.T) {
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	gate := make(chan struct{})
	reg := jobs.NewRegistry(counter(gate))
	startRunner(t, pool, reg)
	id, err := jobs.Enqueue(ctx, pool, reg, jobs.Request{Kind: "count", Args: json.RawMessage(`{"n": 100}`)})
	require.NoError(t, err)
	gate <- struct{}{}
	j := waitState(t, pool, id, "running")
	require.NotNil(t, j.HeartbeatAge)
	state, err := jobs.Cancel(ctx, pool, id)
	require.NoError(t, err)
	require.Equal(t, "running", state, "a running job ends at its next heartbeat")
	j = waitState(t, pool, id, "cancelled")
	require.Equal(t, int64(1), j.Done)
	_, err = jobs.Cancel(ctx, pool, 999999)
	require.ErrorIs(t, err, jobs.ErrNotFound)

	// A queued job is cancelled at once (no runner of its kind here takes it first).
	reg2 := jobs.NewRegistry(counter(nil))
	q, err := jobs.Enqueue(ctx, pool, reg2, jobs.Request{Kind: "count", Args: json.RawMessage(`{"n": 1, "block": true}`)})
	require.NoError(t, err)
	state, err = jobs.Cancel(ctx, pool, q)
	require.NoError(t, err)
	if state != "cancelled" { // the runner took it first: it ends at its next heartbeat
		waitState(t, pool, q, "cancelled")
	}
}

// TestStalledJobResumes stages a job whose process died mid-way (running, its heartbeat older
// than its timeout, its cursor at 3): a runner's sweep marks it interrupted and a new attempt
// resumes it from the cursor.
func TestStalledJobResumes(t *testing.T) {
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	reg := jobs.NewRegistry(counter(nil))
	id, err := jobs.Enqueue(ctx, pool, reg, jobs.Request{Kind: "count", Args: json.RawMessage(`{"n": 10}`), Timeout: time.Second})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE (args->>'job')::bigint = $1`, id)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE jobs SET state = 'running', attempts = 1, runner = 'dead', done = 3, total = 10, cursor = '3',
		started_at = now() - interval '1 minute', heartbeat_at = now() - interval '2 seconds' WHERE id = $1`, id)
	require.NoError(t, err)
	n, err := jobs.Sweep(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	j, err := jobs.Get(ctx, pool, id)
	require.NoError(t, err)
	require.Equal(t, "interrupted", j.State)
	require.Contains(t, j.Error, "heartbeat lost (dead)")
	startRunner(t, pool, reg)
	j = waitState(t, pool, id, "completed")
	require.JSONEq(t, `{"from": 3, "to": 10}`, string(j.Result))
	require.Equal(t, int32(2), j.Attempts)
	n, err = jobs.Sweep(ctx, pool)
	require.NoError(t, err)
	require.Zero(t, n)
}
