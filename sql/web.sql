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
-- attempts got over the last minute and its last reaper pass ('epoch': none).
SELECT l.replica::text AS replica,
       l.in_flight::bigint AS in_flight,
       l.leases_last_minute::bigint AS leases_last_minute,
       coalesce(l.last_leased_at, 'epoch')::timestamptz AS last_leased_at,
       (SELECT count(*) FROM dispatch d WHERE d.state = 'reserved' AND d.replica = l.replica)::bigint AS reserved,
       (SELECT count(*) FROM attempts a
        WHERE a.replica = l.replica AND a.answered_at > now() - interval '1 minute')::bigint AS results_last_minute,
       coalesce((SELECT max(p.at) FROM reaper_passes p WHERE p.replica = l.replica), 'epoch')::timestamptz AS last_reaper_pass
FROM audit_replica_load l;

-- name: WebWorkerActivity :many
-- WebWorkerActivity is audit_worker_activity, most recently seen first, a page of it.
SELECT worker, service, first_seen, last_request, last_result, dispatched, results, attempts, running,
       accepted, superseded, stale, retryable, unusable, expired, dead_lettered
FROM audit_worker_activity LIMIT @lim;

-- name: WebInFlight :many
-- WebInFlight is audit_in_flight: who holds which lease now, a page of it by deadline.
SELECT task_id, run, corpus, service, entry, attempt, coalesce(worker, '')::text AS worker, replica,
       leased_at, deadline, answered
FROM audit_in_flight LIMIT @lim;

-- name: WebActiveWorkers :one
-- WebActiveWorkers counts the workers (by name and service) heard from in the last minute.
SELECT count(*)::bigint FROM workers
WHERE greatest(last_request, last_result) > now() - interval '1 minute';
