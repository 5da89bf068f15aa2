-- name: StageRows :many
-- StageRows reads the stages of the accepted attempts of a service's tasks (of one corpus, if
-- given) answered from since until until (NULL: now on), newest first, at most max_rows:
-- queue/reports summarizes them (docs/stages.md). Attempts with no stages recorded (written by
-- an earlier release) are left out.
SELECT a.task_id, t.entry, a.leased_at, a.answered_at::timestamptz AS answered_at, a.stages
FROM attempts a
JOIN tasks t ON t.id = a.task_id
WHERE t.service_id = @service_id::int
  AND (sqlc.narg(corpus_id)::int IS NULL OR t.corpus_id = sqlc.narg(corpus_id)::int)
  AND a.outcome = 'accepted' AND a.stages IS NOT NULL
  AND a.answered_at >= @since::timestamptz
  AND (sqlc.narg(until)::timestamptz IS NULL OR a.answered_at < sqlc.narg(until)::timestamptz)
ORDER BY a.answered_at DESC
LIMIT @max_rows::int;

-- name: StageRun :one
-- StageRun reads a run's corpus, service and time span (ended_at NULL: the open run).
-- A run whose corpus or service was deleted reads as corpus or service 0.
SELECT coalesce(corpus_id, 0)::int AS corpus_id, coalesce(service_id, 0)::int AS service_id, started_at, ended_at
FROM runs
WHERE id = @id;

-- name: StageBytes :one
-- StageBytes gives how many attempts have stages recorded, and the bytes those stages take in
-- the rows (pg_column_size): the stages' storage cost (docs/stages.md#storage).
SELECT count(*)::bigint AS attempts, coalesce(sum(pg_column_size(stages)), 0)::bigint AS bytes
FROM attempts
WHERE stages IS NOT NULL;
