-- Audit views for psql (DESIGN §1: "where is task 123, which worker had it, why is it Fatal").
-- The views are defined here only; a later migration changes one with CREATE OR REPLACE VIEW.
-- docs/auditing.md explains each (a test checks every view has its section there).

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION task_status_name(status smallint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE status
        WHEN 1 THEN 'dispatched'
        WHEN 0 THEN 'todo'
        WHEN -1 THEN 'no_problem'
        WHEN -2 THEN 'warning'
        WHEN -3 THEN 'error'
        WHEN -4 THEN 'fatal'
        WHEN -5 THEN 'invalid'
        WHEN -6 THEN 'blocked'
    END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION task_status_name(smallint) IS 'The name of a tasks.status value, as the CLI shows it.';

CREATE VIEW audit_in_flight AS
SELECT d.task_id,
       d.run,
       c.name AS corpus,
       s.name AS service,
       t.entry,
       cardinality(d.attempt_workers) - 1 AS attempt,
       d.attempt_workers[cardinality(d.attempt_workers)] AS worker,
       d.replica,
       d.leased_at,
       d.deadline,
       round(extract(epoch FROM now() - d.deadline), 1) AS overdue_seconds,
       d.retries,
       d.answered,
       d.received_at
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = d.service_id
WHERE d.state = 'in_flight'
ORDER BY d.deadline, d.task_id;
COMMENT ON VIEW audit_in_flight IS 'Leases out with a worker now: who has each task, since when, and how overdue.';

CREATE VIEW audit_late_results AS
SELECT d.task_id,
       d.run,
       t.run AS task_run,
       c.name AS corpus,
       s.name AS service,
       t.entry,
       d.attempt_workers AS workers,
       d.finished_attempt,
       d.attempt_workers[d.finished_attempt + 1] AS finished_worker,
       task_status_name(d.finished_status) AS finished_status,
       d.dead_lettered,
       d.run < t.run AS stale,
       d.forget_at,
       round(extract(epoch FROM d.forget_at - now()), 1) AS forget_in_seconds
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = d.service_id
WHERE d.state = 'settling' AND NOT d.queued
ORDER BY d.forget_at, d.task_id;
COMMENT ON VIEW audit_late_results IS 'Rows out of flight held for late results, with the result that stands and when they are forgotten.';

CREATE VIEW audit_dead_letters AS
SELECT t.id AS task_id,
       t.run,
       c.name AS corpus,
       s.name AS service,
       t.entry,
       a.workers,
       a.last_leased_at,
       (SELECT string_agg(m.category || '/' || m.what, ', ' ORDER BY m.id)
        FROM task_messages m
        WHERE m.task_id = t.id AND m.run = t.run) AS cause,
       d.task_id IS NOT NULL AS held,
       d.forget_at
FROM tasks t
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = t.service_id
CROSS JOIN LATERAL (
    SELECT array_agg(x.worker ORDER BY x.attempt) AS workers, max(x.leased_at) AS last_leased_at
    FROM attempts x
    WHERE x.task_id = t.id AND x.run = t.run
) a
LEFT JOIN dispatch d ON d.task_id = t.id AND d.run = t.run
WHERE t.status = -4
  AND EXISTS (SELECT 1 FROM attempts x
              WHERE x.task_id = t.id AND x.run = t.run
                AND (x.outcome = 'dead_lettered' OR (x.outcome = 'retryable' AND x.status = -4)))
  AND NOT EXISTS (SELECT 1 FROM attempts x
                  WHERE x.task_id = t.id AND x.run = t.run AND x.outcome = 'accepted')
ORDER BY t.id;
COMMENT ON VIEW audit_dead_letters IS 'Tasks whose current run gave up and still stand as a stand-in Fatal.';

CREATE VIEW audit_task_history AS
SELECT a.task_id,
       c.name AS corpus,
       s.name AS service,
       t.entry,
       a.run,
       a.run = t.run AS current_run,
       a.attempt,
       a.worker,
       a.replica,
       a.leased_at,
       a.answered_at,
       round(extract(epoch FROM a.answered_at - a.leased_at), 3) AS seconds,
       a.outcome,
       task_status_name(a.status) AS result_status,
       task_status_name(t.status) AS task_status
FROM attempts a
JOIN tasks t ON t.id = a.task_id
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = t.service_id;
COMMENT ON VIEW audit_task_history IS 'One row per dispatch attempt with its task and outcome; filter by task_id.';

CREATE VIEW audit_worker_activity AS
SELECT w.name AS worker,
       s.name AS service,
       w.first_seen,
       w.last_request,
       w.last_result,
       greatest(w.last_request, w.last_result) AS last_seen,
       w.dispatched,
       w.results,
       coalesce(a.attempts, 0) AS attempts,
       coalesce(a.running, 0) AS running,
       coalesce(a.accepted, 0) AS accepted,
       coalesce(a.superseded, 0) AS superseded,
       coalesce(a.stale, 0) AS stale,
       coalesce(a.retryable, 0) AS retryable,
       coalesce(a.unusable, 0) AS unusable,
       coalesce(a.expired, 0) AS expired,
       coalesce(a.dead_lettered, 0) AS dead_lettered
FROM workers w
JOIN services s ON s.id = w.service_id
LEFT JOIN (
    SELECT x.worker,
           t.service_id,
           count(*) AS attempts,
           count(*) FILTER (WHERE x.outcome IS NULL) AS running,
           count(*) FILTER (WHERE x.outcome = 'accepted') AS accepted,
           count(*) FILTER (WHERE x.outcome = 'superseded') AS superseded,
           count(*) FILTER (WHERE x.outcome = 'stale') AS stale,
           count(*) FILTER (WHERE x.outcome = 'retryable') AS retryable,
           count(*) FILTER (WHERE x.outcome = 'unusable') AS unusable,
           count(*) FILTER (WHERE x.outcome = 'expired') AS expired,
           count(*) FILTER (WHERE x.outcome = 'dead_lettered') AS dead_lettered
    FROM attempts x
    JOIN tasks t ON t.id = x.task_id
    GROUP BY x.worker, t.service_id
) a ON a.worker = w.name AND a.service_id = w.service_id
ORDER BY last_seen DESC NULLS LAST, w.name, s.name;
COMMENT ON VIEW audit_worker_activity IS 'Per worker and service: leases, results, last seen, and attempt outcomes.';

CREATE VIEW audit_replica_load AS
SELECT coalesce(f.replica, l.replica) AS replica,
       coalesce(f.in_flight, 0) AS in_flight,
       f.next_deadline,
       coalesce(l.leases_last_minute, 0) AS leases_last_minute,
       l.last_leased_at
FROM (
    SELECT replica, count(*) AS in_flight, min(deadline) AS next_deadline
    FROM dispatch
    WHERE state = 'in_flight'
    GROUP BY replica
) f
FULL JOIN (
    SELECT replica,
           count(*) FILTER (WHERE leased_at > now() - interval '1 minute') AS leases_last_minute,
           max(leased_at) AS last_leased_at
    FROM attempts
    WHERE leased_at > now() - interval '1 hour'
    GROUP BY replica
) l ON l.replica = f.replica
ORDER BY 1;
COMMENT ON VIEW audit_replica_load IS 'Per replica: leases in flight now and leases over the last minute.';

-- +goose Down
DROP VIEW audit_replica_load;
DROP VIEW audit_worker_activity;
DROP VIEW audit_task_history;
DROP VIEW audit_dead_letters;
DROP VIEW audit_late_results;
DROP VIEW audit_in_flight;
DROP FUNCTION task_status_name(smallint);
