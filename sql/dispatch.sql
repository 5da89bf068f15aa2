-- Queries on the dispatch table: one row per task and run while the task is in flight, queued
-- for a retry, or held for late results. Rows are locked here, decided in queue/lease, and
-- written back by the statements of queue/lease/writes.go.

-- name: ClockNow :one
-- ClockNow is the database clock, or the injected test clock when now is given.
SELECT coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS now;

-- name: DispatchLockQueued :many
-- DispatchLockQueued takes queued retries of a service's current runs for leasing.
SELECT sqlc.embed(d), t.corpus_id, t.entry
FROM dispatch d
JOIN tasks t ON t.id = d.task_id AND t.run = d.run
WHERE d.service_id = @service_id AND d.queued
ORDER BY d.task_id
LIMIT @max_rows
FOR UPDATE OF d, t SKIP LOCKED;

-- name: DispatchLockForTasks :many
-- DispatchLockForTasks locks every kept row of the given tasks, for claims. Call after
-- TaskLockForClaim: tasks are always locked before their dispatch rows.
SELECT *
FROM dispatch
WHERE task_id = ANY(@task_ids::bigint[])
ORDER BY task_id, run
FOR UPDATE;

-- name: DispatchLockExpired :many
-- DispatchLockExpired takes in-flight rows past their deadline, skipping rows another transaction
-- holds.
SELECT sqlc.embed(d), t.run AS task_run
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
WHERE d.state = 'in_flight'
  AND d.deadline <= @now::timestamptz
ORDER BY d.deadline
LIMIT @max_rows
FOR UPDATE OF d, t SKIP LOCKED;

-- name: DispatchForget :execrows
-- DispatchForget deletes held rows whose late-result window has passed; a queued retry is
-- never forgotten before it is leased.
DELETE FROM dispatch
WHERE (task_id, run) IN (
    SELECT f.task_id, f.run
    FROM dispatch f
    WHERE f.state = 'settling' AND NOT f.queued AND f.forget_at <= @now::timestamptz
    ORDER BY f.forget_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
);

-- name: DispatchDropEarlierReservations :execrows
-- DispatchDropEarlierReservations deletes the fresh reservations (no attempt yet) of runs older
-- than each task's new run: nothing of them happened, and a hand-out of one not yet attributed
-- finds no row (its result is unknown).
DELETE FROM dispatch d
USING (SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run) AS k
WHERE d.task_id = k.task_id AND d.run < k.run AND d.state = 'reserved'
  AND cardinality(d.attempt_workers) = 0;

-- name: DispatchSettleEarlierRuns :execrows
-- DispatchSettleEarlierRuns takes the open rows of runs older than each task's new run out of
-- flight (in flight, queued, or a reserved retry), so their late results are told apart as
-- stale. Call after DispatchDropEarlierReservations.
UPDATE dispatch d
SET state = 'settling', queued = false, forget_at = @forget_at::timestamptz
FROM (SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run) AS k
WHERE d.task_id = k.task_id AND d.run < k.run AND (d.state IN ('in_flight', 'reserved') OR d.queued);

-- name: ReaperPassInsert :exec
INSERT INTO reaper_passes (replica, at, requeued, dead_lettered, forgotten, released)
VALUES (@replica, @at::timestamptz, @requeued, @dead_lettered, @forgotten, @released);
