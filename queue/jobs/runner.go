package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Queue is the River queue of the jobs' attempts.
const Queue = "cortexq_jobs"

// riverArgs is one attempt of a job: the River job that runs it.
type riverArgs struct {
	Job int64 `json:"job"`
}

func (riverArgs) Kind() string { return "cortexq_job" }

// MaxAttempts 1: an attempt River rescues is not retried by River; Sweep resumes the job with a
// new attempt instead, once its heartbeat is stale.
func (riverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, Queue: Queue}
}

// Config is a runner's settings.
type Config struct {
	// Workers is how many jobs the runner works at once (default 2).
	Workers int
	// Beat is how often a running job's heartbeat and progress are written (default 5 s); a job
	// whose heartbeat is older than its timeout (Timeout at enqueue) is interrupted.
	Beat time.Duration
	// Name names the runner in a job's runner column.
	Name   string
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.Beat <= 0 {
		c.Beat = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Runner works jobs: a River client on Queue (out of River's leader election, so it never
// competes with the reaper's client), and a sweep that interrupts and resumes stalled jobs.
type Runner struct {
	cfg    Config
	env    Env
	reg    *Registry
	client *river.Client[pgx.Tx]
	cancel context.CancelFunc
	done   chan struct{}
}

// NewRunner builds a runner of reg's operations on env; nothing runs until Start.
func NewRunner(env Env, reg *Registry, cfg Config) (*Runner, error) {
	cfg = cfg.withDefaults()
	r := &Runner{cfg: cfg, env: env, reg: reg}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &attemptWorker{r: r}); err != nil {
		return nil, fmt.Errorf("jobs worker: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(env.Base.Pool), &river.Config{
		Queues:  map[string]river.QueueConfig{Queue: {MaxWorkers: cfg.Workers}},
		Workers: workers,
		Logger:  cfg.Logger.With("component", "river_jobs"),
		// Polling only, as the reaper's client (queue/reaper): no NOTIFY channel to forge.
		PollOnly:               true,
		FetchPollInterval:      250 * time.Millisecond,
		FetchCooldown:          100 * time.Millisecond,
		LeaderElectionDisabled: true,
	})
	if err != nil {
		return nil, fmt.Errorf("jobs river client: %w", err)
	}
	r.client = client
	return r, nil
}

// Start starts working jobs and sweeping stalled ones.
func (r *Runner) Start(ctx context.Context) error {
	ctx, r.cancel = context.WithCancel(ctx)
	if err := r.client.Start(ctx); err != nil {
		r.cancel()
		return fmt.Errorf("start the job runner: %w", err)
	}
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		r.sweepLoop(ctx)
	}()
	return nil
}

// Stop stops the runner: running attempts are cancelled (their jobs interrupted, resumed by
// another runner's sweep or this one's next start).
func (r *Runner) Stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.client.StopAndCancel(stop); err != nil {
		r.cfg.Logger.Warn("stop the job runner", "error", err)
	}
}

func (r *Runner) sweepLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.Beat)
	defer t.Stop()
	for {
		if n, err := Sweep(ctx, r.env.Base.Pool); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("sweep stalled jobs", "error", err)
		} else if n > 0 {
			r.cfg.Logger.Info("stalled jobs interrupted and resumed", "jobs", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// attemptWorker runs one attempt of a job.
type attemptWorker struct {
	river.WorkerDefaults[riverArgs]
	r *Runner
}

// Timeout: none; a job runs as long as it beats.
func (w *attemptWorker) Timeout(*river.Job[riverArgs]) time.Duration { return -1 }

func (w *attemptWorker) Work(ctx context.Context, job *river.Job[riverArgs]) error {
	return w.r.attempt(ctx, job.Args.Job, job.ID)
}

// attempt runs the attempt riverID of job id, if it is still the job's current one.
func (r *Runner) attempt(ctx context.Context, id, riverID int64) error {
	q := dbsqlc.New(r.env.Base.Pool)
	row, err := q.JobStart(ctx, r.cfg.Name, id, &riverID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // cancelled, finished, or resumed by another attempt
	}
	if err != nil {
		return fmt.Errorf("start job %d: %w", id, err)
	}
	logger := r.cfg.Logger.With("job", id, "kind", row.Kind)
	op, ok := r.reg.ops[row.Kind]
	if !ok {
		return r.finish(q, id, riverID, nil, nil, fmt.Errorf("%w %q", ErrUnknownKind, row.Kind), logger)
	}
	p := &Progress{done: row.Done, total: row.Total, resumed: row.Cursor}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p.persist = func(ctx context.Context) error { return beat(ctx, q, id, riverID, p, cancel) }
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		r.beatLoop(ctx, p, logger)
	}()
	logger.Info("job started", "done", row.Done, "total", row.Total)
	res, err := op.Run(ctx, r.env, row.Args, p)
	cause := context.Cause(ctx)
	cancel(nil)
	<-beats
	switch {
	case errors.Is(cause, errLost):
		logger.Warn("job attempt ended without its job: another attempt has it", "error", err)
		return nil
	case errors.Is(cause, errCancelled):
		err = errCancelled
	case cause != nil:
		// The runner stopped: the job stays running until its heartbeat is stale, then a
		// sweep resumes it.
		logger.Info("job attempt stopped with its runner; a later attempt resumes it", "error", err)
		return nil
	}
	return r.finish(q, id, riverID, p, res, err, logger)
}

// beatLoop writes the attempt's heartbeat every Beat until ctx ends.
func (r *Runner) beatLoop(ctx context.Context, p *Progress, logger *slog.Logger) {
	t := time.NewTicker(r.cfg.Beat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := p.persist(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("job heartbeat", "error", err)
		}
	}
}

// beat writes the heartbeat and progress; a cancel asked for, or the job lost, cancels the
// attempt's context.
func beat(ctx context.Context, q *dbsqlc.Queries, id, riverID int64, p *Progress, cancel context.CancelCauseFunc) error {
	done, total, cursor := p.snapshot()
	asked, err := q.JobBeat(ctx, dbsqlc.JobBeatParams{ID: id, RiverID: &riverID, Done: done, Total: total, Cursor: cursor})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		cancel(errLost)
		return errLost
	case err != nil:
		if cursor != nil {
			p.mu.Lock()
			p.dirty = true
			p.mu.Unlock()
		}
		return err
	case asked:
		cancel(errCancelled)
	}
	return nil
}

// finish records the attempt's outcome.
func (r *Runner) finish(q *dbsqlc.Queries, id, riverID int64, p *Progress, res any, runErr error, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state, msg := "completed", ""
	switch {
	case errors.Is(runErr, errCancelled):
		state, msg = "cancelled", "cancelled on request"
	case runErr != nil:
		state, msg = "failed", runErr.Error()
	}
	var raw json.RawMessage
	if res != nil {
		b, err := json.Marshal(res)
		if err != nil {
			return fmt.Errorf("job %d result: %w", id, err)
		}
		raw = b
	}
	var done, total int64
	if p != nil {
		done, total, _ = p.snapshot()
	}
	err := q.JobFinish(ctx, dbsqlc.JobFinishParams{ID: id, RiverID: &riverID, State: state, Done: done, Total: total, Result: raw, Error: msg})
	if err != nil {
		return fmt.Errorf("finish job %d: %w", id, err)
	}
	logger.Info("job ended", "state", state, "done", done, "total", total, "error", msg)
	return nil
}

// insertOnly is a River client that only inserts (no queues, no election).
func insertOnly(pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	return river.NewClient(riverpgxv5.New(pool), &river.Config{})
}

// Sweep marks interrupted the running jobs whose heartbeat is older than their timeout, and
// enqueues a new attempt for each one not cancelled, which resumes it from its cursor. It
// returns how many it interrupted. Sweeps of several runners at once are safe: a stale job is
// taken by one.
func Sweep(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	client, err := insertOnly(pool)
	if err != nil {
		return 0, err
	}
	n := 0
	err = pgtx.Run(ctx, pool, pgtx.Options{What: "sweep stalled jobs"}, func(q *dbsqlc.Queries, tx pgx.Tx, _ time.Time) error {
		rows, err := q.JobInterruptStale(ctx)
		if err != nil {
			return err
		}
		n = len(rows)
		for _, row := range rows {
			if row.CancelRequested {
				continue
			}
			if err := attachAttempt(ctx, client, q, tx, row.ID); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// attachAttempt inserts a River attempt of job id in tx and names it in the job's row.
func attachAttempt(ctx context.Context, client *river.Client[pgx.Tx], q *dbsqlc.Queries, tx pgx.Tx, id int64) error {
	res, err := client.InsertTx(ctx, tx, riverArgs{Job: id}, nil)
	if err != nil {
		return fmt.Errorf("enqueue job %d: %w", id, err)
	}
	rid := res.Job.ID
	return q.JobSetRiver(ctx, &rid, id)
}
