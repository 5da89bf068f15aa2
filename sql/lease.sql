-- name: Attribute :many
-- Attribute records the workers of hand-outs from this replica's reservations, a batch in one
-- statement (DESIGN §4 "Attribute"): each reserved row still held by the replica, at the attempt
-- the hand-out started, goes in flight to its worker, with leased_at and the deadline
-- (leased_at + (retries + 1) × lease) from the database clock of this write, and gains its
-- attempts row. A hand-out whose row has moved on (a claim attributed it first, the reaper or
-- an operator took the reservation back) is skipped; the rows returned are those attributed.
-- The rows are locked in (task_id, run) order, as a claim locks them, before they are updated.
WITH h AS (
    SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run,
           unnest(@attempts::int[]) AS attempt, unnest(@workers::text[]) AS worker
), clock AS (
    SELECT coalesce(sqlc.narg(now)::timestamptz, now()) AS now
), locked AS (
    SELECT d.task_id, d.run, h.attempt, h.worker
    FROM dispatch d
    JOIN h ON d.task_id = h.task_id AND d.run = h.run
    -- The state is compared with a sub-select, which keeps the plan on the primary key: a
    -- plain state = 'reserved' lets PostgreSQL pick the partial index of reservations, read
    -- whole for every batch when the planner took the table for small.
    WHERE d.task_id = ANY(@task_ids::bigint[]) AND d.state = (SELECT 'reserved'::text)
      AND d.replica = @replica::text AND cardinality(d.attempt_workers) = h.attempt
    ORDER BY d.task_id, d.run
    FOR UPDATE OF d
), updated AS (
    UPDATE dispatch d
    SET state = 'in_flight', attempt_workers = d.attempt_workers || l.worker, leased_at = c.now,
        deadline = c.now + make_interval(secs => (d.retries + 1) * d.lease_timeout_seconds)
    FROM locked l CROSS JOIN clock c
    WHERE d.task_id = l.task_id AND d.run = l.run AND d.task_id = ANY(@task_ids::bigint[])
    RETURNING d.task_id, d.run, l.attempt, l.worker, d.leased_at, d.deadline
), attempts_added AS (
    INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at)
    SELECT u.task_id, u.run, u.attempt, u.worker, @replica::text, u.leased_at
    FROM updated u
)
SELECT u.task_id, u.run, u.attempt::int AS attempt, u.worker::text AS worker, u.leased_at::timestamptz AS leased_at,
       u.deadline::timestamptz AS deadline
FROM updated u;

-- name: DispatchStillReserved :many
-- DispatchStillReserved returns which of the given tasks this replica still holds reserved:
-- the others were taken back (paused, rerun, deleted, or past their reservation deadline).
SELECT task_id
FROM dispatch
WHERE task_id = ANY(@task_ids::bigint[]) AND state = 'reserved' AND replica = @replica::text;

-- name: DispatchLockReservedExpired :many
-- DispatchLockReservedExpired takes reservations past their deadline, with their tasks, skipping
-- rows other transactions hold.
SELECT sqlc.embed(d), t.run AS task_run, t.status AS task_status
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
WHERE d.state = 'reserved' AND d.deadline <= @now::timestamptz
ORDER BY d.deadline
LIMIT @max_rows
FOR UPDATE OF d, t SKIP LOCKED;

-- name: DispatchLockReservedOfReplica :many
-- DispatchLockReservedOfReplica takes every reservation of a replica, with their tasks, for a
-- replica that stops.
SELECT sqlc.embed(d), t.run AS task_run, t.status AS task_status
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
WHERE d.state = 'reserved' AND d.replica = @replica::text
ORDER BY d.task_id
LIMIT @max_rows
FOR UPDATE OF d, t;
