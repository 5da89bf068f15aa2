-- task_history: one row per dispatch attempt, with its task and what became of it (view
-- audit_task_history). Filter it: WHERE task_id = 123 ORDER BY run, attempt. outcome is NULL
-- while the attempt runs; result_status is the status its reply carried.
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
