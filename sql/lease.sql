-- name: LeaseFresh :many
-- LeaseFresh is the lease's fast path, a whole transaction in one statement (and one round trip
-- with its commit): it leases TODO tasks above after_id to the workers, in order, one each, and
-- returns what it leased. It takes only what needs no decision — tasks without any dispatch row
-- (no earlier run kept) — and nothing at all while the service has a queued retry, which must go
-- first; queue/lease's full path (Go decisions on locked rows) leases the rest.
--
-- queue/lease runs it with its generic plan forced (plan_cache_mode, for its transaction only):
-- planning it costs about 1 ms, as much as running it, and left to choose, PostgreSQL often
-- judged a plan made for the call's values cheaper than the generic one (it is the same plan) and
-- planned every call afresh. The service, after_id, the workers and the limit are sub-selects, so
-- that the generic plan is the plan any values would get; the estimated cost of that plan grows
-- with the backlog, and queue/lease.TunePool turns JIT off so that it never compiles it.
WITH todo AS (
    SELECT t.id, t.corpus_id, t.entry, t.run
    FROM tasks t
    WHERE t.service_id = (SELECT @service_id::int) AND t.status = 0 AND t.id > (SELECT @after_id::bigint)
      -- A scalar subquery, not NOT EXISTS: one index probe per candidate, never a join that
      -- walks the dispatch index from its start.
      AND (SELECT 1 FROM dispatch d WHERE d.task_id = t.id LIMIT 1) IS NULL
      AND NOT EXISTS (SELECT 1 FROM dispatch q WHERE q.service_id = (SELECT @service_id::int) AND q.queued)
    ORDER BY t.id
    LIMIT (SELECT cardinality(@workers::text[]))
    FOR UPDATE OF t SKIP LOCKED
), clock AS (
    SELECT coalesce(sqlc.narg(now)::timestamptz, now()) AS now
), picked AS (
    SELECT n.id, n.corpus_id, n.entry, n.run, w.worker, c.now
    FROM (SELECT todo.*, row_number() OVER (ORDER BY todo.id) AS i FROM todo) AS n
    JOIN unnest((SELECT @workers::text[])) WITH ORDINALITY AS w (worker, i) ON w.i = n.i
    CROSS JOIN clock c
), rows_added AS (
    INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, replica, service_id,
                          lease_timeout_seconds, leased_at)
    SELECT p.id, p.run, 'in_flight', ARRAY[p.worker], p.now + make_interval(secs => @timeout_seconds::int),
           @replica::text, @service_id::int, @timeout_seconds::int, p.now
    FROM picked p
), tasks_set AS (
    UPDATE tasks t SET status = 1
    FROM picked p
    WHERE t.id = p.id
), attempts_added AS (
    INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at)
    SELECT p.id, p.run, 0, p.worker, @replica::text, p.now
    FROM picked p
)
SELECT p.id, p.corpus_id, p.entry, p.run, p.worker::text AS worker, p.now::timestamptz AS leased_at,
       (p.now + make_interval(secs => @timeout_seconds::int))::timestamptz AS deadline
FROM picked p
ORDER BY p.id;
