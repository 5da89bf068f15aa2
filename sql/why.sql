-- name: WhyFacts :one
-- WhyFacts gathers what `cortexq why` reads for a corpus and a service (docs/operations.md, "Why is
-- a corpus not moving?"), at the database clock (or @now): its tasks by state, its fair share
-- against the service's other corpora with TODO tasks, the service's workers that asked in the
-- last minute and those of them holding @cap leases or more, the reaper's and the fold's last
-- passes, its dead letters, and the replicas whose heartbeats stopped.
WITH clock AS (
    SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS now
), counts AS (
    SELECT count(*) FILTER (WHERE status = 0) AS todo,
           count(*) FILTER (WHERE status = 1) AS dispatched,
           count(*) FILTER (WHERE status = -6) AS blocked
    FROM tasks WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int
), share AS (
    SELECT coalesce((SELECT weight FROM corpus_shares WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int), 1) AS weight,
           coalesce((SELECT priority FROM corpus_shares WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int), 0) AS priority
), rivals AS (
    -- The service's other corpora with TODO tasks, and their shares.
    SELECT c.name, coalesce(s.weight, 1) AS weight, coalesce(s.priority, 0) AS priority
    FROM corpora c
    LEFT JOIN corpus_shares s ON s.corpus_id = c.id AND s.service_id = @service_id::int
    WHERE c.id <> @corpus_id::int
      AND EXISTS (SELECT 1 FROM tasks t WHERE t.corpus_id = c.id AND t.service_id = @service_id::int AND t.status = 0)
), asking AS (
    SELECT w.name FROM workers w, clock
    WHERE w.service_id = @service_id::int AND w.last_request > clock.now - interval '1 minute'
), holding AS (
    SELECT d.attempt_workers[cardinality(d.attempt_workers)] AS worker, count(*) AS leases
    FROM dispatch d
    WHERE d.service_id = @service_id::int AND d.state = 'in_flight'
    GROUP BY 1
)
SELECT counts.todo::bigint AS todo, counts.dispatched::bigint AS dispatched, counts.blocked::bigint AS blocked,
       share.weight::int AS weight, share.priority::int AS priority,
       coalesce((SELECT string_agg(r.name || ' (priority ' || r.priority || ')', ', ' ORDER BY r.priority DESC, r.name)
                 FROM rivals r WHERE r.priority > share.priority), '')::text AS higher_priority,
       coalesce((SELECT sum(r.weight) FROM rivals r WHERE r.priority = share.priority), 0)::bigint AS rival_weight,
       (SELECT count(*) FROM asking)::bigint AS workers_asking,
       coalesce((SELECT max(w.last_request) FROM workers w WHERE w.service_id = @service_id::int), 'epoch')::timestamptz AS last_request,
       (SELECT count(*) FROM asking a JOIN holding h ON h.worker = a.name WHERE h.leases >= @cap::int)::bigint AS workers_at_cap,
       coalesce((SELECT max(at) FROM reaper_passes), 'epoch')::timestamptz AS last_reap,
       (SELECT folded_at FROM report_fold_state) AS folded_at,
       (SELECT count(*) FROM report_changes)::bigint AS fold_pending,
       (SELECT count(*) FROM dispatch d JOIN tasks t ON t.id = d.task_id
        WHERE d.dead_lettered AND t.corpus_id = @corpus_id::int AND d.service_id = @service_id::int)::bigint AS dead_letters,
       (SELECT count(*) FROM attempts a JOIN tasks t ON t.id = a.task_id, clock
        WHERE a.outcome = 'dead_lettered' AND a.leased_at > clock.now - interval '1 hour'
          AND t.corpus_id = @corpus_id::int AND t.service_id = @service_id::int)::bigint AS dead_letters_hour,
       coalesce((SELECT string_agg(h.replica || ' (' || floor(extract(epoch FROM clock.now - h.seen_at))::bigint || ' s)', ', ' ORDER BY h.replica)
                 FROM replica_heartbeats h, clock
                 WHERE NOT h.stopped AND h.seen_at < clock.now - make_interval(secs => @gone_after_seconds::float8)), '')::text AS replicas_gone,
       clock.now::timestamptz AS now
FROM counts, share, clock;
