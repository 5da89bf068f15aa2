-- in_flight: every lease out with a worker now, soonest deadline first (view audit_in_flight).
-- overdue_seconds counts from now(): negative while the lease runs, positive once the reaper is
-- due to move the row on. attempt is 0-based within the run.
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
