-- Queries of the web dashboard (queue/web through queue/lease/dashboard.go) that no command
-- already has. The dashboard reads progress, reports, runs, diffs and task histories through
-- the same queries as the CLI (admin.sql, report.sql); what is here reads the audit views
-- (migrations/00003_audit_views.sql) and the attempts trail by the minute. Every query only
-- reads, so an audit role (cortexq db grant-audit) can run them.

-- name: WebThroughput :many
-- WebThroughput counts the attempts answered per corpus and service in each of the last 60
-- minutes (minute 0 is the current one).
SELECT t.corpus_id, t.service_id,
       least(floor(extract(epoch FROM now() - a.answered_at) / 60), 59)::int AS minute,
       count(*)::bigint AS replies
FROM attempts a
JOIN tasks t ON t.id = a.task_id
WHERE a.answered_at > now() - interval '1 hour'
GROUP BY 1, 2, 3;

-- name: WebReplicaLoad :many
-- WebReplicaLoad is audit_replica_load with each replica's reservations, the results its
-- attempts got over the last minute, its last reaper pass ('epoch': none) and its heartbeat
-- (replica_heartbeats; 'epoch': none on record), and the replicas with a heartbeat in the last
-- hour that have no lease.
WITH r AS (
    SELECT coalesce(l.replica, h.replica)::text AS replica,
           coalesce(l.in_flight, 0)::bigint AS in_flight,
           coalesce(l.leases_last_minute, 0)::bigint AS leases_last_minute,
           coalesce(l.last_leased_at, 'epoch')::timestamptz AS last_leased_at,
           coalesce(h.seen_at, 'epoch')::timestamptz AS seen_at,
           coalesce(h.stopped, false)::bool AS stopped
    FROM audit_replica_load l
    FULL JOIN (SELECT * FROM replica_heartbeats WHERE seen_at > now() - interval '1 hour') h ON h.replica = l.replica
)
SELECT r.replica, r.in_flight, r.leases_last_minute, r.last_leased_at, r.seen_at, r.stopped,
       (SELECT count(*) FROM dispatch d WHERE d.state = 'reserved' AND d.replica = r.replica)::bigint AS reserved,
       (SELECT count(*) FROM attempts a
        WHERE a.replica = r.replica AND a.answered_at > now() - interval '1 minute')::bigint AS results_last_minute,
       coalesce((SELECT max(p.at) FROM reaper_passes p WHERE p.replica = r.replica), 'epoch')::timestamptz AS last_reaper_pass,
       now()::timestamptz AS now
FROM r
ORDER BY r.replica;

-- name: WebWorkers :many
-- WebWorkers lists the workers on record (by name and service), most recently seen first, a
-- page of them: what the workers table keeps (audit_worker_activity's first columns), read on
-- each load.
SELECT w.name AS worker, s.name AS service, w.service_id, w.first_seen, w.last_request, w.last_result,
       w.dispatched, w.results
FROM workers w
JOIN services s ON s.id = w.service_id
ORDER BY greatest(w.last_request, w.last_result) DESC NULLS LAST, w.name, s.name
LIMIT @lim;

-- name: WebWorkerOutcomes :many
-- WebWorkerOutcomes counts the outcomes of each worker's attempts (by name and service) over the
-- whole attempts trail, as audit_worker_activity does: it reads every attempt (seconds on
-- millions), so the dashboard reads it in the background (docs/web.md#cost-to-the-database).
SELECT x.worker, t.service_id,
       count(*)::bigint AS attempts,
       count(*) FILTER (WHERE x.outcome IS NULL)::bigint AS running,
       count(*) FILTER (WHERE x.outcome = 'accepted')::bigint AS accepted,
       count(*) FILTER (WHERE x.outcome = 'superseded')::bigint AS superseded,
       count(*) FILTER (WHERE x.outcome = 'stale')::bigint AS stale,
       count(*) FILTER (WHERE x.outcome = 'retryable')::bigint AS retryable,
       count(*) FILTER (WHERE x.outcome = 'unusable')::bigint AS unusable,
       count(*) FILTER (WHERE x.outcome = 'expired')::bigint AS expired,
       count(*) FILTER (WHERE x.outcome = 'dead_lettered')::bigint AS dead_lettered
FROM attempts x
JOIN tasks t ON t.id = x.task_id
GROUP BY x.worker, t.service_id;

-- name: WebInFlight :many
-- WebInFlight is audit_in_flight: who holds which lease now, a page of it by deadline.
SELECT task_id, run, corpus, service, entry, attempt, coalesce(worker, '')::text AS worker, replica,
       leased_at, deadline, answered
FROM audit_in_flight LIMIT @lim;

-- name: WebActiveWorkers :one
-- WebActiveWorkers counts the workers (by name and service) heard from in the last minute.
SELECT count(*)::bigint FROM workers
WHERE greatest(last_request, last_result) > now() - interval '1 minute';

-- name: WebSearchTasks :many
-- WebSearchTasks finds at most @lim tasks whose entry holds @pattern (an ILIKE pattern, its
-- wildcards escaped by the caller), through the trigram index task_entries_trgm (migration
-- 00022: the index lives off tasks, whose rows change status twice a task).
SELECT t.id, c.name AS corpus, s.name AS service, t.entry, t.status, t.run
FROM task_entries e
JOIN tasks t ON t.id = e.task_id
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = t.service_id
WHERE e.entry ILIKE @pattern::text
LIMIT @lim;

-- name: WebTaskExists :one
-- WebTaskExists tells whether a task of that id exists.
SELECT EXISTS (SELECT 1 FROM tasks WHERE id = @id)::bool;

-- name: WebDeadLetters :many
-- WebDeadLetters is audit_dead_letters, a page of it: the tasks whose current run gave up, with
-- the cause their stand-in Fatal records.
SELECT task_id, run, corpus, service, entry, coalesce(cause, '')::text AS cause,
       coalesce(last_leased_at, 'epoch')::timestamptz AS last_leased_at
FROM audit_dead_letters LIMIT @lim;

-- name: WebQueuedRetries :many
-- WebQueuedRetries lists the tasks queued for a retry, with their retries so far and the cause
-- of the last one.
SELECT d.task_id, d.run, c.name AS corpus, s.name AS service, t.entry, d.retries,
       coalesce(d.last_cause::text, '')::text AS last_cause, d.leased_at
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = t.service_id
WHERE d.queued
ORDER BY d.task_id
LIMIT @lim;

-- name: WebWorkerHour :many
-- WebWorkerHour counts each worker's attempts leased over the last hour and the results they
-- got, through attempts_worker (worker, leased_at), for the workers named.
SELECT w.name::text AS worker,
       (SELECT count(*) FROM attempts a WHERE a.worker = w.name AND a.leased_at > now() - interval '1 hour')::bigint AS leases,
       (SELECT count(*) FROM attempts a WHERE a.worker = w.name AND a.leased_at > now() - interval '1 hour'
          AND a.answered_at IS NOT NULL)::bigint AS answered
FROM unnest(@names::text[]) AS w(name);

-- name: WebWorkerAttempts :many
-- WebWorkerAttempts lists a worker's latest attempts, newest first.
SELECT a.task_id, a.run, a.attempt, a.replica, a.leased_at, a.answered_at, coalesce(a.outcome, '')::text AS outcome,
       a.status, c.name AS corpus, s.name AS service, t.entry
FROM attempts a
JOIN tasks t ON t.id = a.task_id
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = t.service_id
WHERE a.worker = @worker
ORDER BY a.leased_at DESC
LIMIT @lim;

-- name: WebThroughputDay :many
-- WebThroughputDay counts the attempts answered in each quarter hour of the last day (quarter 0
-- is the current one, 95 the earliest).
SELECT least(floor(extract(epoch FROM now() - answered_at) / 900), 95)::int AS quarter,
       count(*)::bigint AS replies
FROM attempts
WHERE answered_at > now() - interval '1 day'
GROUP BY 1;
