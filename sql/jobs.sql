-- name: JobCreate :one
-- JobCreate records a new background job, queued.
INSERT INTO jobs (kind, args, actor, surface, heartbeat_timeout)
VALUES (@kind, @args::jsonb, @actor, @surface, make_interval(secs => @timeout_secs::float8))
RETURNING id;

-- name: JobSetRiver :exec
-- JobSetRiver names the River job of the job's next attempt.
UPDATE jobs SET river_id = @river_id WHERE id = @id;

-- name: JobStart :one
-- JobStart begins an attempt of the River job river_id: only if it is the job's current attempt
-- and the job is neither finished nor cancelled. It returns the job as it stands.
UPDATE jobs SET state = 'running', attempts = attempts + 1, runner = @runner, started_at = now(),
    heartbeat_at = now(), attempt_done = done, error = ''
WHERE id = @id AND river_id = @river_id AND state IN ('queued', 'interrupted', 'running') AND NOT cancel_requested
RETURNING id, kind, args, cursor, done, total;

-- name: JobBeat :one
-- JobBeat is a running attempt's heartbeat with its progress (and cursor, when given); it
-- returns whether a cancel was asked for. No row: the attempt is no longer the job's.
UPDATE jobs SET heartbeat_at = now(), done = @done, total = @total,
    cursor = COALESCE(sqlc.narg('cursor')::jsonb, cursor)
WHERE id = @id AND river_id = @river_id AND state = 'running'
RETURNING cancel_requested;

-- name: JobFinish :exec
-- JobFinish ends the attempt river_id of a job: completed, failed or cancelled.
UPDATE jobs SET state = @state, finished_at = now(), heartbeat_at = now(), done = @done, total = @total,
    result = sqlc.narg('result')::jsonb, error = @error
WHERE id = @id AND river_id = @river_id AND state = 'running';

-- name: JobInterruptStale :many
-- JobInterruptStale marks interrupted the running jobs whose heartbeat is older than their
-- timeout (their process died), returning them.
UPDATE jobs SET state = 'interrupted', error = 'heartbeat lost (' || runner || ')'
WHERE state = 'running' AND heartbeat_at < now() - heartbeat_timeout
RETURNING id, cancel_requested;

-- name: JobRequestCancel :one
-- JobRequestCancel asks for a job's cancel: a queued or interrupted job is cancelled at once, a
-- running one at its next heartbeat. It returns the state after.
UPDATE jobs SET cancel_requested = true,
    state = CASE WHEN state IN ('queued', 'interrupted') THEN 'cancelled' ELSE state END,
    finished_at = CASE WHEN state IN ('queued', 'interrupted') THEN now() ELSE finished_at END
WHERE id = @id
RETURNING state, river_id;

-- name: JobGet :one
SELECT id, kind, args, actor, surface, state, river_id, attempts, runner, done, total, attempt_done,
    result, error, cancel_requested, extract(epoch FROM heartbeat_timeout)::float8 AS timeout_secs,
    created_at, started_at, heartbeat_at, finished_at, now()::timestamptz AS db_now
FROM jobs WHERE id = @id;

-- name: JobList :many
-- JobList lists jobs newest first: only queued, running and interrupted ones when active.
SELECT id, kind, args, actor, surface, state, river_id, attempts, runner, done, total, attempt_done,
    result, error, cancel_requested, extract(epoch FROM heartbeat_timeout)::float8 AS timeout_secs,
    created_at, started_at, heartbeat_at, finished_at, now()::timestamptz AS db_now
FROM jobs
WHERE NOT @active::boolean OR state IN ('queued', 'running', 'interrupted')
ORDER BY id DESC
LIMIT @max_rows;

-- name: ExportPage :many
-- ExportPage reads a page of a corpus and service's finished tasks of the given statuses, in
-- entry order after an entry (the unique index on corpus, service and entry).
SELECT entry, status
FROM tasks
WHERE corpus_id = @corpus_id AND service_id = @service_id AND entry > @after::text
  AND status = ANY(@statuses::smallint[])
ORDER BY entry
LIMIT @max_rows;

-- name: ExportRun :one
-- ExportRun is the newest run of a corpus and service (0: none).
SELECT COALESCE(max(id), 0)::bigint FROM runs WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int;
