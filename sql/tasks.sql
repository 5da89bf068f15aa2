-- name: TaskLockTodo :many
-- TaskLockTodo takes TODO tasks of a service with ids above after_id for a fresh lease, lowest
-- id first, with the workers and newest run of any rows of theirs still kept (a rerun's earlier
-- runs). after_id is the leaser's cursor: starting past the tasks it leased last spares the scan
-- the index entries those left behind.
SELECT t.id, t.corpus_id, t.entry, t.run,
       ARRAY(SELECT unnest(d.attempt_workers) FROM dispatch d WHERE d.task_id = t.id)::text[] AS kept_workers,
       (SELECT coalesce(max(d.run), 0) FROM dispatch d WHERE d.task_id = t.id)::int AS kept_max_run
FROM tasks t
WHERE t.service_id = @service_id AND t.status = 0 AND t.id > @after_id::bigint
ORDER BY t.id
LIMIT @max_rows
FOR UPDATE OF t SKIP LOCKED;

-- name: TaskLockForClaim :many
-- TaskLockForClaim locks the tasks results arrived for, in id order.
SELECT id, service_id, corpus_id, entry, status, run
FROM tasks
WHERE id = ANY(@ids::bigint[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: TaskRerun :many
-- TaskRerun moves the tasks of a scope to TODO in a new run. Optional filters: statuses, and a
-- message of the current run with the given severity, category and what; or, with no_messages,
-- no message of the current run of the given severity (the report's category no_messages).
WITH picked AS (
    SELECT s.id
    FROM tasks s
    WHERE s.corpus_id = @corpus_id AND s.service_id = @service_id
      AND (sqlc.narg('statuses')::smallint[] IS NULL OR s.status = ANY(sqlc.narg('statuses')::smallint[]))
      AND (@no_messages::bool AND NOT EXISTS (
               SELECT 1 FROM task_messages m
               WHERE m.task_id = s.id AND m.run = s.run AND m.severity = sqlc.narg('severity')::text)
           OR NOT @no_messages::bool AND sqlc.narg('severity')::text IS NULL
           AND sqlc.narg('category')::text IS NULL AND sqlc.narg('what')::text IS NULL
           OR NOT @no_messages::bool AND EXISTS (
               SELECT 1 FROM task_messages m
               WHERE m.task_id = s.id AND m.run = s.run
                 AND (sqlc.narg('severity')::text IS NULL OR m.severity = sqlc.narg('severity')::text)
                 AND (sqlc.narg('category')::text IS NULL OR m.category = sqlc.narg('category')::text)
                 AND (sqlc.narg('what')::text IS NULL OR m.what = sqlc.narg('what')::text)))
    ORDER BY s.id
    FOR NO KEY UPDATE
)
UPDATE tasks t
SET status = 0, run = t.run + 1
FROM picked
WHERE t.id = picked.id
RETURNING t.id, t.run;

-- name: TaskTally :one
SELECT count(*)::bigint AS tasks,
       count(*) FILTER (WHERE status = 0)::bigint AS todo,
       count(*) FILTER (WHERE status = -1)::bigint AS no_problem,
       count(*) FILTER (WHERE status = -2)::bigint AS warning,
       count(*) FILTER (WHERE status = -3)::bigint AS error,
       count(*) FILTER (WHERE status = -4)::bigint AS fatal,
       count(*) FILTER (WHERE status = -5)::bigint AS invalid,
       count(*) FILTER (WHERE status <= -6)::bigint AS blocked
FROM tasks
WHERE corpus_id = @corpus_id AND service_id = @service_id;

-- name: RunCloseOpen :execrows
-- RunCloseOpen closes the open run of a corpus and service with the tallies it ended with.
UPDATE runs
SET ended_at = @ended_at::timestamptz, scope = @scope::jsonb, tasks = @tasks, todo = @todo,
    no_problem = @no_problem, warning = @warning, error = @error, fatal = @fatal,
    invalid = @invalid, blocked = @blocked
WHERE corpus_id = @corpus_id AND service_id = @service_id AND ended_at IS NULL;

-- name: RunInsertClosed :exec
-- RunInsertClosed records a run that had no open row (tasks imported before run tracking).
INSERT INTO runs (corpus_id, service_id, started_at, ended_at, scope, tasks, todo, no_problem,
                  warning, error, fatal, invalid, blocked)
VALUES (@corpus_id, @service_id, @ended_at::timestamptz, @ended_at::timestamptz, @scope::jsonb,
        @tasks, @todo, @no_problem, @warning, @error, @fatal, @invalid, @blocked);

-- name: RunOpen :exec
INSERT INTO runs (corpus_id, service_id, started_at, note)
VALUES (@corpus_id, @service_id, @started_at::timestamptz, @note);
