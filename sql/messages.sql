-- name: MessageDeleteEarlierRuns :exec
DELETE FROM task_message_logs m
USING (SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run) AS k
WHERE m.task_id = k.task_id AND m.run < k.run AND m.task_id = ANY(@task_ids::bigint[]);

-- name: MessageKindsEnsure :many
-- MessageKindsEnsure gives the message_kinds ids and usual details of (severity, category, what)
-- triples, adding those missing with @usual_details (NULL for ''), the details of the first
-- message of each (migrations/00025_usual_details.sql). A triple another transaction adds
-- meanwhile is left out (this statement's snapshot does not see it): ask again for what is
-- missing.
WITH k AS (
    SELECT unnest(@severities::text[]) AS severity, unnest(@categories::text[]) AS category,
           unnest(@whats::text[]) AS what, unnest(@usual_details::text[]) AS usual_details
), added AS (
    INSERT INTO message_kinds (severity, category, what, usual_details)
    SELECT DISTINCT ON (k.severity, k.category, k.what) k.severity, k.category, k.what,
           nullif(k.usual_details, '')
    FROM k
    ORDER BY 1, 2, 3
    ON CONFLICT ON CONSTRAINT message_kinds_key DO NOTHING
    RETURNING id, severity, category, what, usual_details
)
SELECT a.id, a.severity, a.category::text AS category, a.what::text AS what,
       coalesce(a.usual_details, '')::text AS usual_details
FROM added a
UNION ALL
SELECT m.id, m.severity, m.category::text, m.what::text, coalesce(m.usual_details, '')::text
FROM message_kinds m
JOIN k ON k.severity = m.severity AND k.category = m.category AND k.what = m.what;
