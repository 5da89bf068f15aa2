-- dead_letters: tasks whose current run gave up, still standing as a stand-in Fatal (view
-- audit_dead_letters): every attempt expired, or the last one reported a retryable cause, and no
-- late result has been accepted since. held says whether a late result is still taken (until
-- forget_at); cause is the stand-in's messages.
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
