-- name: MessageDeleteEarlierRuns :exec
DELETE FROM task_messages m
USING (SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@runs::int[]) AS run) AS k
WHERE m.task_id = k.task_id AND m.run < k.run;
