-- Background jobs (docs/operations.md#background-jobs): one row per long operation (an import, an
-- export, a verify, ...) enqueued from the dashboard, the API or `cortexq ... --detach`. River
-- (river_job) runs it; this row is its handle, its progress and its heartbeat, and outlives
-- River's attempts: a job whose process died is marked interrupted here once its heartbeat is
-- older than heartbeat_timeout, and a new River attempt resumes it from its cursor.

-- +goose Up
CREATE TABLE jobs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind              text NOT NULL,
    args              jsonb NOT NULL DEFAULT '{}',
    actor             text NOT NULL DEFAULT '',
    surface           text NOT NULL DEFAULT '',
    state             text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'interrupted', 'completed', 'failed', 'cancelled')),
    river_id          bigint,
    attempts          integer NOT NULL DEFAULT 0,
    runner            text NOT NULL DEFAULT '',
    done              bigint NOT NULL DEFAULT 0,
    total             bigint NOT NULL DEFAULT 0,
    attempt_done      bigint NOT NULL DEFAULT 0,
    cursor            jsonb,
    result            jsonb,
    error             text NOT NULL DEFAULT '',
    cancel_requested  boolean NOT NULL DEFAULT false,
    heartbeat_timeout interval NOT NULL DEFAULT '30 seconds',
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    heartbeat_at      timestamptz,
    finished_at       timestamptz
);
CREATE INDEX jobs_active ON jobs (id) WHERE state IN ('queued', 'running', 'interrupted');
COMMENT ON TABLE jobs IS 'Background jobs: handle, progress and heartbeat of a long operation run by River (docs/operations.md#background-jobs).';
COMMENT ON COLUMN jobs.river_id IS 'The River job (river_job.id) of the current attempt; an older attempt that wakes finds another id and stops.';
COMMENT ON COLUMN jobs.cursor IS 'The operation''s own persisted progress, read by the attempt that resumes it.';
COMMENT ON COLUMN jobs.attempt_done IS 'done when the current attempt started (its rate counts from there).';
COMMENT ON COLUMN jobs.heartbeat_at IS 'The database clock at the running attempt''s last heartbeat.';

-- +goose Down
DROP TABLE jobs;
