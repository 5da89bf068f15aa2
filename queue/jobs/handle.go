package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// DefaultTimeout is how old a running job's heartbeat may grow before the job is interrupted.
const DefaultTimeout = 30 * time.Second

// Request is a job to enqueue.
type Request struct {
	Kind string
	Args json.RawMessage
	// Actor and Surface (cli, web, api) say who asked.
	Actor, Surface string
	// Timeout is the heartbeat timeout (DefaultTimeout when 0).
	Timeout time.Duration
}

// Enqueue validates req against reg and records the job with its first River attempt, in one
// transaction; it returns the job's id. A runner picks it up.
func Enqueue(ctx context.Context, pool *pgxpool.Pool, reg *Registry, req Request) (int64, error) {
	if err := reg.Check(req.Kind, req.Args); err != nil {
		return 0, err
	}
	if len(req.Args) == 0 {
		req.Args = json.RawMessage("{}")
	}
	if req.Timeout <= 0 {
		req.Timeout = DefaultTimeout
	}
	client, err := insertOnly(pool)
	if err != nil {
		return 0, err
	}
	var id int64
	err = pgtx.Run(ctx, pool, pgtx.Options{What: "enqueue job"}, func(q *dbsqlc.Queries, tx pgx.Tx, _ time.Time) error {
		id, err = q.JobCreate(ctx, dbsqlc.JobCreateParams{Kind: req.Kind, Args: req.Args, Actor: req.Actor,
			Surface: req.Surface, TimeoutSecs: req.Timeout.Seconds()})
		if err != nil {
			return fmt.Errorf("record job: %w", err)
		}
		return attachAttempt(ctx, client, q, tx, id)
	})
	return id, err
}

// ErrNotFound is a job id with no job.
var ErrNotFound = errors.New("no such job")

// Cancel asks for job id's cancel and returns its state after: a queued or interrupted job is
// cancelled at once, a running one at its next heartbeat (its state stays running until then).
func Cancel(ctx context.Context, pool *pgxpool.Pool, id int64) (string, error) {
	row, err := dbsqlc.New(pool).JobRequestCancel(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w %d", ErrNotFound, id)
	}
	if err != nil {
		return "", fmt.Errorf("cancel job %d: %w", id, err)
	}
	return row.State, nil
}

// Job is a job as listed: its row with the rate, the time left and the heartbeat's age.
type Job struct {
	ID              int64           `json:"id"`
	Kind            string          `json:"kind"`
	Args            json.RawMessage `json:"args"`
	Actor           string          `json:"actor"`
	Surface         string          `json:"surface"`
	State           string          `json:"state"`
	Attempts        int32           `json:"attempts"`
	Runner          string          `json:"runner"`
	Done            int64           `json:"done"`
	Total           int64           `json:"total"`
	Rate            float64         `json:"rate"`
	ETASeconds      float64         `json:"eta_seconds"`
	HeartbeatAge    *float64        `json:"heartbeat_age_seconds"`
	HeartbeatLimit  float64         `json:"heartbeat_timeout_seconds"`
	CancelRequested bool            `json:"cancel_requested"`
	Result          json.RawMessage `json:"result,omitempty"`
	Error           string          `json:"error"`
	CreatedAt       time.Time       `json:"created_at"`
	StartedAt       *time.Time      `json:"started_at"`
	HeartbeatAt     *time.Time      `json:"heartbeat_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
}

// Active reports whether the job is not finished: queued, running or interrupted.
func (j Job) Active() bool {
	return j.State == "queued" || j.State == "running" || j.State == "interrupted"
}

// Get returns job id.
func Get(ctx context.Context, pool *pgxpool.Pool, id int64) (Job, error) {
	row, err := dbsqlc.New(pool).JobGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, fmt.Errorf("%w %d", ErrNotFound, id)
	}
	if err != nil {
		return Job{}, fmt.Errorf("read job %d: %w", id, err)
	}
	return view(dbsqlc.JobListRow(row)), nil
}

// List returns the newest jobs (at most limit), or only the active ones.
func List(ctx context.Context, pool *pgxpool.Pool, active bool, limit int) ([]Job, error) {
	rows, err := dbsqlc.New(pool).JobList(ctx, active, int32(min(max(limit, 1), 10000)))
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	out := make([]Job, len(rows))
	for i, r := range rows {
		out[i] = view(r)
	}
	return out, nil
}

// view computes a job's rate, time left and heartbeat age from its row (the database's clock).
func view(r dbsqlc.JobListRow) Job {
	j := Job{ID: r.ID, Kind: r.Kind, Args: r.Args, Actor: r.Actor, Surface: r.Surface, State: r.State,
		Attempts: r.Attempts, Runner: r.Runner, Done: r.Done, Total: r.Total, HeartbeatLimit: r.TimeoutSecs,
		CancelRequested: r.CancelRequested, Result: r.Result, Error: r.Error, CreatedAt: r.CreatedAt,
		StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt, FinishedAt: r.FinishedAt}
	if r.State == "running" && r.HeartbeatAt != nil {
		age := r.DbNow.Sub(*r.HeartbeatAt).Seconds()
		j.HeartbeatAge = &age
		if r.StartedAt != nil {
			rate, eta := Rate(r.Done, r.Total, r.AttemptDone, r.HeartbeatAt.Sub(*r.StartedAt))
			j.Rate, j.ETASeconds = rate, eta.Seconds()
		}
	}
	return j
}
