-- name: MessageDeleteForRuns :exec
DELETE FROM task_messages m
USING (SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run) AS k
WHERE m.task_id = k.task_id AND m.run = k.run;

-- name: MessageDeleteEarlierRuns :exec
DELETE FROM task_messages m
USING (SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run) AS k
WHERE m.task_id = k.task_id AND m.run < k.run;

-- name: MessageInsert :copyfrom
INSERT INTO task_messages (task_id, run, severity, category, what, details)
VALUES ($1, $2, $3, $4, $5, $6);
