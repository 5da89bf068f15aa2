-- worker_activity: per worker and service, what it was given and what became of it (view
-- audit_worker_activity), most recently seen first. dispatched/results are the workers table's
-- counters; the outcome counts come from the attempts trail (running: no outcome yet).
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
