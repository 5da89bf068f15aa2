-- name: VerifyTasks :many
-- VerifyTasks reads a page of tasks for `cortexq verify`, in id order after @after: where each
-- task's source and result archive are (its corpus's path, sandbox id and service name), the
-- source's size and modification time when imported, and the result archive the task's
-- standing result published: that of the last accepted attempt of its current run, if it
-- has one (has_result), with its recorded size and SHA-256 (NULL: not recorded).
SELECT t.id, t.corpus_id, t.service_id, t.entry, t.status, t.source_size, t.source_mtime,
       s.name AS service, c.path AS corpus_path,
       CASE WHEN c.parent_corpus_id IS NULL THEN 0 ELSE coalesce(c.archive_id, c.id) END::int AS sandbox_id,
       -- A task imported from CorTeX as NoProblem, Warning or Error, and not converted since,
       -- has CorTeX's result archive: its presence is checked.
       (a.attempt IS NOT NULL OR t.status BETWEEN -3 AND -1
        AND EXISTS (SELECT 1 FROM cortex_tasks c WHERE c.task_id = t.id AND c.cortex_status = t.status))::bool AS has_result,
       a.result_size, a.result_digest
FROM tasks t
JOIN services s ON s.id = t.service_id
JOIN corpora c ON c.id = t.corpus_id
LEFT JOIN LATERAL (
    SELECT x.attempt, x.result_size, x.result_digest
    FROM attempts x
    WHERE x.task_id = t.id AND x.run = t.run AND x.outcome = 'accepted' AND t.status BETWEEN -5 AND -1
    ORDER BY x.answered_at DESC NULLS LAST, x.attempt DESC
    LIMIT 1
) a ON true
WHERE t.id > @after::bigint
  AND (sqlc.narg('corpus_id')::int IS NULL OR t.corpus_id = sqlc.narg('corpus_id')::int)
  AND (sqlc.narg('service_id')::int IS NULL OR t.service_id = sqlc.narg('service_id')::int)
ORDER BY t.id
LIMIT @page::int;

-- name: VerifyAccounted :many
-- VerifyAccounted reports which of the result archives found on disk a task accounts for: the
-- i-th candidate is the archive of service_ids[i] in corpus_ids[i] beside the source entries[i]
-- (one source a directory: every source beside the archive is a candidate of its own).
SELECT DISTINCT k.i::int AS i
FROM (SELECT unnest(@idx::int[]) AS i, unnest(@corpus_ids::int[]) AS corpus_id,
             unnest(@service_ids::int[]) AS service_id, unnest(@entries::text[]) AS entry) AS k
WHERE EXISTS (SELECT 1 FROM tasks t
              WHERE t.corpus_id = k.corpus_id AND t.service_id = k.service_id AND t.entry = k.entry);

-- name: VerifyAccountedDirs :many
-- VerifyAccountedDirs is VerifyAccounted for archives with no source beside them: a task
-- accounts for one if its entry is in that directory. One pass over the corpora's tasks a call,
-- for a batch of directories (a rare case: sources lost since import).
SELECT DISTINCT k.i::int AS i
FROM (SELECT unnest(@idx::int[]) AS i, unnest(@corpus_ids::int[]) AS corpus_id,
             unnest(@service_ids::int[]) AS service_id, unnest(@dirs::text[]) AS dir) AS k
JOIN tasks t ON t.corpus_id = k.corpus_id AND t.service_id = k.service_id
            AND regexp_replace(t.entry, '/[^/]*$', '') = k.dir
WHERE t.corpus_id = ANY(@corpus_ids::int[]);

-- name: VerifyCorpora :many
-- VerifyCorpora lists the corpora (and sandboxes) whose files `cortexq verify` walks.
SELECT c.id, c.name, c.path, CASE WHEN c.parent_corpus_id IS NULL THEN 0 ELSE coalesce(c.archive_id, c.id) END::int AS sandbox_id
FROM corpora c
WHERE sqlc.narg('corpus_id')::int IS NULL OR c.id = sqlc.narg('corpus_id')::int
ORDER BY c.id;

-- name: TaskSourceRecord :exec
-- TaskSourceRecord records the sources' size and modification time again (verify --requeue:
-- the source as it is now is the one the new run converts).
UPDATE tasks t
SET source_size = k.size, source_mtime = k.mtime
FROM (SELECT unnest(@ids::bigint[]) AS id, unnest(@sizes::bigint[]) AS size,
             unnest(@mtimes::timestamptz[]) AS mtime) AS k
WHERE t.id = k.id;
