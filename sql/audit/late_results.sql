-- late_results: rows out of flight that are held for late results, next to be forgotten first
-- (view audit_late_results). finished_attempt/finished_status is the result that stands (NULL:
-- none yet); stale rows belong to a run a rerun replaced, so their results are dropped.
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
