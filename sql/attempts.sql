-- name: AttemptInsert :copyfrom
INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: AttemptFinish :exec
-- AttemptFinish records what became of attempts. An accepted attempt keeps that outcome against a
-- repeat of its own result.
UPDATE attempts a
SET outcome = CASE WHEN a.outcome = 'accepted' AND k.outcome IN ('superseded', 'stale')
                   THEN a.outcome ELSE k.outcome END,
    status = CASE WHEN k.status = 0 THEN a.status ELSE k.status END,
    answered_at = CASE WHEN k.outcome IN ('expired', 'dead_lettered', 'replaced')
                       THEN a.answered_at ELSE coalesce(a.answered_at, @now::timestamptz) END
FROM (SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run,
             unnest(@attempts::int[]) AS attempt, unnest(@outcomes::text[]) AS outcome,
             unnest(@statuses::smallint[]) AS status) AS k
WHERE a.task_id = k.task_id AND a.run = k.run AND a.attempt = k.attempt;

-- name: AttemptDelete :exec
DELETE FROM attempts a
USING (SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run, unnest(@attempts::int[]) AS attempt) AS k
WHERE a.task_id = k.task_id AND a.run = k.run AND a.attempt = k.attempt;
