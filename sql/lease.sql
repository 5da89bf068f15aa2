-- name: Attribute :many
-- Attribute records the workers of hand-outs from this replica's reservations, a batch in one
-- statement (docs/semantics.md#attribute): each reserved row still held by the replica, at the attempt
-- the hand-out started, goes in flight to its worker, with leased_at and the deadline
-- (leased_at + (retries + 1) × lease), and gains its attempts row. leased_at is the database
-- clock of this write less the hand-out's age as the replica measured it (@ages_us, its
-- monotonic clock), never before the reservation: the lease clock starts at the hand-out, not
-- at its attribution. A hand-out whose row has moved on (a claim attributed it first, the
-- reaper or an operator took the reservation back) is skipped; the rows returned are those
-- attributed. The rows are locked in (task_id, run) order, as a claim locks them.
WITH h AS (
    SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run,
           unnest(@attempts::int[]) AS attempt, unnest(@workers::text[]) AS worker,
           unnest(@ages_us::bigint[]) AS age_us
), clock AS (
    SELECT coalesce(sqlc.narg(now)::timestamptz, now()) AS now
), locked AS (
    SELECT d.task_id, d.run, h.attempt, h.worker,
           greatest(d.leased_at, c.now - h.age_us * interval '1 microsecond') AS leased_at
    FROM dispatch d
    JOIN h ON d.task_id = h.task_id AND d.run = h.run
    CROSS JOIN clock c
    -- The state is compared with a sub-select, which keeps the plan on the primary key: a
    -- plain state = 'reserved' lets PostgreSQL pick the partial index of reservations, read
    -- whole for every batch when the planner took the table for small.
    WHERE d.task_id = ANY(@task_ids::bigint[]) AND d.state = (SELECT 'reserved'::text)
      AND d.replica = @replica::text AND cardinality(d.attempt_workers) = h.attempt
    ORDER BY d.task_id, d.run
    FOR UPDATE OF d
), updated AS (
    UPDATE dispatch d
    SET state = 'in_flight', attempt_workers = d.attempt_workers || l.worker, leased_at = l.leased_at,
        deadline = l.leased_at + make_interval(secs => (d.retries + 1) * d.lease_timeout_seconds)
    FROM locked l
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
-- DispatchLockReservedOfReplica takes the reservations a replica name holds, with their tasks:
-- at its start, those of its earlier process, which died holding them (queue/lease/name.go).
SELECT sqlc.embed(d), t.run AS task_run, t.status AS task_status
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
WHERE d.state = 'reserved' AND d.replica = @replica::text
ORDER BY d.deadline
LIMIT @max_rows
FOR UPDATE OF d, t SKIP LOCKED;

-- name: ReserveFresh :many
-- ReserveFresh is the reservation's fast path, a whole transaction in one statement (one round
-- trip with its commit): it reserves up to max_rows TODO tasks of a service for the replica,
-- skipping rows other transactions hold, and returns them. It takes only what needs no decision
-- — tasks without any dispatch row (no earlier run kept) — and nothing at all while the service
-- has a queued retry, which must go first; Store.Reserve's full path (Go decisions on locked
-- rows) reserves the rest.
--
-- Fair share (docs/semantics.md#fair-share): only the corpora of the highest priority that has
-- a TODO task are served, each from its own cursor (after_ids) in id order. The replica keeps a
-- pass per corpus (passes; a corpus missing from corpus_ids, or behind, starts one stride before
-- vtime, the replica's last share key): the k-th next task of a corpus has the share key pass +
-- k / weight, and the max_rows lowest keys win, so corpora are served in proportion to their
-- weights. Each corpus reads at most its share of the batch (plus one), through tasks_todo:
-- the rows read are bounded by the batch and the corpora, not by any backlog.
--
-- queue/lease runs it with its generic plan forced: planning it costs about as much as running
-- it. The service and the limit are sub-selects, so that the generic plan is the plan any values
-- would get (docs/performance.md#plan-cache).
WITH known AS (
    SELECT unnest(@corpus_ids::int[]) AS corpus_id, unnest(@passes::float8[]) AS corpus_pass,
           unnest(@after_ids::bigint[]) AS after_id
), shares AS (
    -- GREATEST ignores NULL: a corpus this replica has not served starts at the floor.
    SELECT s.corpus_id, s.weight, s.priority, coalesce(k.after_id, 0) AS after_id,
           greatest(k.corpus_pass, (SELECT @vtime::float8) - 1.0 / s.weight)::float8 AS pass
    FROM corpus_shares s
    LEFT JOIN known k ON k.corpus_id = s.corpus_id
    WHERE s.service_id = (SELECT @service_id::int)
      -- A scalar subquery, not EXISTS: one probe of tasks_todo per corpus. EXISTS let the generic
      -- plan (made while tasks was nearly empty) materialize every TODO task of the service and
      -- semi-join the corpora to it: 7,250 rows read for each reservation of an 8,000-task bench.
      AND (SELECT t.id FROM tasks t
           WHERE t.service_id = s.service_id AND t.corpus_id = s.corpus_id AND t.status = 0
             AND t.id > coalesce(k.after_id, 0)
           ORDER BY t.service_id, t.corpus_id, t.id LIMIT 1) IS NOT NULL
), tier AS (
    -- Each corpus reads at most its share of the batch, plus two: corpora that run short leave
    -- the rest to the full path (or the next reservation).
    SELECT s.corpus_id, s.weight, s.priority, s.after_id, s.pass,
           ((z.batch + z.corpora) * s.weight / z.total)::int + 2 AS quota
    FROM shares s
    CROSS JOIN (SELECT top.priority, top.batch, count(*) AS corpora, sum(u.weight) AS total
                FROM shares u
                JOIN (SELECT max(priority) AS priority, (SELECT @max_rows::int) AS batch FROM shares) top ON u.priority = top.priority
                GROUP BY top.priority, top.batch) z
    WHERE s.priority = z.priority
      AND NOT EXISTS (SELECT 1 FROM dispatch q WHERE q.service_id = (SELECT @service_id::int) AND q.queued)
), candidates AS (
    SELECT a.corpus_id, c.id, c.entry, c.run,
           a.pass + (row_number() OVER (PARTITION BY a.corpus_id ORDER BY c.id))::float8 / a.weight AS share_key
    FROM tier a
    CROSS JOIN LATERAL (
        SELECT t.id, t.entry, t.run
        FROM tasks t
        WHERE t.service_id = (SELECT @service_id::int) AND t.corpus_id = a.corpus_id AND t.status = 0
          AND t.id > a.after_id
          -- A scalar subquery, not NOT EXISTS: one index probe per candidate, never a join that
          -- walks the dispatch index from its start.
          AND (SELECT 1 FROM dispatch d WHERE d.task_id = t.id LIMIT 1) IS NULL
        ORDER BY t.id
        LIMIT a.quota
        FOR UPDATE OF t SKIP LOCKED
    ) c
), todo AS (
    SELECT * FROM candidates
    ORDER BY share_key, corpus_id, id
    LIMIT (SELECT @max_rows::int)
), clock AS (
    SELECT coalesce(sqlc.narg(now)::timestamptz, now()) AS now
), rows_added AS (
    INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, replica, service_id,
                          lease_timeout_seconds, leased_at)
    SELECT p.id, p.run, 'reserved', '{}', c.now + make_interval(secs => @ttl_seconds::float8),
           @replica::text, (SELECT @service_id::int), @timeout_seconds::int, c.now
    FROM todo p CROSS JOIN clock c
), tasks_set AS (
    UPDATE tasks t SET status = 1
    FROM todo p
    WHERE t.id = p.id
)
SELECT p.id, p.corpus_id, p.entry, p.run, p.share_key::float8 AS share_key,
       (c.now + make_interval(secs => @ttl_seconds::float8))::timestamptz AS until
FROM todo p CROSS JOIN clock c
ORDER BY p.share_key, p.corpus_id, p.id;
