-- name: TaskLockTodo :many
-- TaskLockTodo takes TODO tasks of a service for a fresh lease, by fair share as ReserveFresh
-- takes them (its parameters mean the same), from the highest priority at or below max_priority
-- that has a TODO task above its cursors; with the workers and newest run of any rows of theirs
-- still kept (a rerun's earlier runs). Each row carries its corpus's priority, so that the
-- caller can go on to the next lower one.
WITH known AS (
    SELECT unnest(@corpus_ids::int[]) AS corpus_id, unnest(@passes::float8[]) AS corpus_pass,
           unnest(@after_ids::bigint[]) AS after_id
), shares AS (
    SELECT s.corpus_id, s.weight, s.priority, coalesce(k.after_id, 0) AS after_id,
           greatest(k.corpus_pass, (@vtime::float8) - 1.0 / s.weight)::float8 AS pass
    FROM corpus_shares s
    LEFT JOIN known k ON k.corpus_id = s.corpus_id
    WHERE s.service_id = @service_id::int AND s.priority <= @max_priority::int
      AND EXISTS (SELECT 1 FROM tasks t
                  WHERE t.service_id = s.service_id AND t.corpus_id = s.corpus_id AND t.status = 0
                    AND t.id > coalesce(k.after_id, 0))
), tier AS (
    -- Each corpus reads up to the whole batch: the full path fills what the fast path left
    -- (a corpus ran short of its share), so it must not run short itself.
    SELECT s.corpus_id, s.weight, s.priority, s.after_id, s.pass, (@max_rows::int) AS quota
    FROM shares s
    WHERE s.priority = (SELECT max(priority) FROM shares)
), candidates AS (
    SELECT a.corpus_id, a.priority, c.id, c.entry, c.run,
           a.pass + (row_number() OVER (PARTITION BY a.corpus_id ORDER BY c.id))::float8 / a.weight AS share_key
    FROM tier a
    CROSS JOIN LATERAL (
        SELECT t.id, t.entry, t.run
        FROM tasks t
        WHERE t.service_id = @service_id::int AND t.corpus_id = a.corpus_id AND t.status = 0
          AND t.id > a.after_id
        ORDER BY t.id
        LIMIT a.quota
        FOR UPDATE OF t SKIP LOCKED
    ) c
)
SELECT c.id, c.corpus_id, c.entry, c.run, c.priority::int AS priority, c.share_key::float8 AS share_key,
       ARRAY(SELECT unnest(d.attempt_workers) FROM dispatch d WHERE d.task_id = c.id)::text[] AS kept_workers,
       (SELECT coalesce(max(d.run), 0) FROM dispatch d WHERE d.task_id = c.id)::int AS kept_max_run
FROM candidates c
ORDER BY c.share_key, c.corpus_id, c.id
LIMIT @max_rows::int;

-- name: TaskLockForClaim :many
-- TaskLockForClaim locks the tasks results arrived for, in id order; todo_since dates the wait
-- in TODO of a first attempt's stages (docs/stages.md).
SELECT id, service_id, corpus_id, entry, status, run, todo_since
FROM tasks
WHERE id = ANY(@ids::bigint[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: TaskRerun :many
-- TaskRerun moves the tasks of a scope to TODO in a new run, waiting from now (todo_since).
-- Optional filters: statuses, task ids, and a message of the current run with the given severity, category and what; or, with no_messages,
-- no message of the current run of the given severity (the report's category no_messages).
WITH picked AS (
    SELECT s.id
    FROM tasks s
    WHERE s.corpus_id = @corpus_id AND s.service_id = @service_id
      AND (sqlc.narg('statuses')::smallint[] IS NULL OR s.status = ANY(sqlc.narg('statuses')::smallint[]))
      AND (sqlc.narg('task_ids')::bigint[] IS NULL OR s.id = ANY(sqlc.narg('task_ids')::bigint[]))
      AND (@no_messages::bool AND NOT EXISTS (
               SELECT 1 FROM task_message_logs m
               WHERE m.task_id = s.id AND m.run = s.run
                 AND m.kinds && ARRAY(SELECT k.id FROM message_kinds k WHERE k.severity = sqlc.narg('severity')::text))
           OR NOT @no_messages::bool AND sqlc.narg('severity')::text IS NULL
           AND sqlc.narg('category')::text IS NULL AND sqlc.narg('what')::text IS NULL
           OR NOT @no_messages::bool AND EXISTS (
               SELECT 1 FROM task_message_logs m
               WHERE m.task_id = s.id AND m.run = s.run
                 AND m.kinds && ARRAY(SELECT k.id FROM message_kinds k
                                      WHERE (sqlc.narg('severity')::text IS NULL OR k.severity = sqlc.narg('severity')::text)
                                        AND (sqlc.narg('category')::text IS NULL OR k.category = sqlc.narg('category')::text)
                                        AND (sqlc.narg('what')::text IS NULL OR k.what = sqlc.narg('what')::text))))
    ORDER BY s.id
    FOR NO KEY UPDATE
)
UPDATE tasks t
SET status = 0, run = t.run + 1, todo_since = now()
FROM picked
WHERE t.id = picked.id
RETURNING t.id, t.run;

-- name: TaskRerunCount :one
-- TaskRerunCount counts the tasks TaskRerun would move, with the same filters and no lock: the
-- preview of a rerun (cortexq rerun without --yes). TestRerun and TestReportCountsEqualBruteForce
-- check that the preview counts what the rerun then moves.
SELECT count(*)::bigint
FROM tasks s
WHERE s.corpus_id = @corpus_id AND s.service_id = @service_id
  AND (sqlc.narg('statuses')::smallint[] IS NULL OR s.status = ANY(sqlc.narg('statuses')::smallint[]))
  AND (sqlc.narg('task_ids')::bigint[] IS NULL OR s.id = ANY(sqlc.narg('task_ids')::bigint[]))
  AND (@no_messages::bool AND NOT EXISTS (
           SELECT 1 FROM task_message_logs m
           WHERE m.task_id = s.id AND m.run = s.run
             AND m.kinds && ARRAY(SELECT k.id FROM message_kinds k WHERE k.severity = sqlc.narg('severity')::text))
       OR NOT @no_messages::bool AND sqlc.narg('severity')::text IS NULL
       AND sqlc.narg('category')::text IS NULL AND sqlc.narg('what')::text IS NULL
       OR NOT @no_messages::bool AND EXISTS (
           SELECT 1 FROM task_message_logs m
           WHERE m.task_id = s.id AND m.run = s.run
             AND m.kinds && ARRAY(SELECT k.id FROM message_kinds k
                                  WHERE (sqlc.narg('severity')::text IS NULL OR k.severity = sqlc.narg('severity')::text)
                                    AND (sqlc.narg('category')::text IS NULL OR k.category = sqlc.narg('category')::text)
                                    AND (sqlc.narg('what')::text IS NULL OR k.what = sqlc.narg('what')::text))));

-- name: RunOpenOf :one
-- RunOpenOf returns the open run of a corpus and service, if any, without a lock (a rerun's preview).
SELECT id
FROM runs
WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int AND ended_at IS NULL
ORDER BY id DESC
LIMIT 1;

-- name: TaskTally :one
-- TaskTally counts the tasks of a corpus and service by status, from the task_totals ledger
-- (migrations/00013_task_totals.sql): exact, without counting the tasks.
SELECT coalesce(sum(tasks), 0)::bigint AS tasks,
       coalesce(sum(tasks) FILTER (WHERE status = 0), 0)::bigint AS todo,
       coalesce(sum(tasks) FILTER (WHERE status = -1), 0)::bigint AS no_problem,
       coalesce(sum(tasks) FILTER (WHERE status = -2), 0)::bigint AS warning,
       coalesce(sum(tasks) FILTER (WHERE status = -3), 0)::bigint AS error,
       coalesce(sum(tasks) FILTER (WHERE status = -4), 0)::bigint AS fatal,
       coalesce(sum(tasks) FILTER (WHERE status = -5), 0)::bigint AS invalid,
       coalesce(sum(tasks) FILTER (WHERE status <= -6), 0)::bigint AS blocked
FROM task_totals
WHERE corpus_id = @corpus_id AND service_id = @service_id;

-- name: RunOpen :exec
INSERT INTO runs (corpus_id, service_id, started_at, note)
VALUES (@corpus_id::int, @service_id::int, @started_at::timestamptz, @note);
