-- The queries behind `cortexq report`, `runs`, `diff` and `sandbox` (docs/reports.md shows
-- them for psql). They only read, in plain snapshots: no lock a claim or a rerun waits on.

-- name: ReportStatuses :many
-- ReportStatuses counts the tasks of a corpus and service by status.
SELECT status, count(*)::bigint AS tasks
FROM tasks
WHERE corpus_id = @corpus_id AND service_id = @service_id
GROUP BY status;

-- name: ReportCategories :many
-- ReportCategories lists the categories of the messages of a severity in the current runs of
-- the tasks with a status, with the tasks having one and the messages; with no_messages, the
-- tasks with no such message are a category no_messages of their own. Page of a sorted list
-- (most tasks first), with the list's length.
WITH cats AS (
    SELECT m.category::text AS category, count(DISTINCT m.task_id)::bigint AS tasks,
           count(*)::bigint AS messages
    FROM tasks t
    JOIN task_messages m ON m.task_id = t.id AND m.run = t.run
    WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id AND t.status = @status
      AND m.severity = @severity
    GROUP BY m.category
    UNION ALL
    SELECT 'no_messages', count(*)::bigint, 0::bigint
    FROM tasks t
    WHERE @no_messages::bool AND t.corpus_id = @corpus_id AND t.service_id = @service_id
      AND t.status = @status
      AND NOT EXISTS (SELECT 1 FROM task_messages m
                      WHERE m.task_id = t.id AND m.run = t.run AND m.severity = @severity)
    HAVING count(*) > 0
)
SELECT category, tasks, messages, count(*) OVER ()::bigint AS total
FROM cats
ORDER BY tasks DESC, messages DESC, category
LIMIT @lim OFFSET @off;

-- name: ReportWhats :many
-- ReportWhats lists the whats of one category, as ReportCategories lists categories.
SELECT m.what::text AS what, count(DISTINCT m.task_id)::bigint AS tasks,
       count(*)::bigint AS messages, count(*) OVER ()::bigint AS total
FROM tasks t
JOIN task_messages m ON m.task_id = t.id AND m.run = t.run
WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id AND t.status = @status
  AND m.severity = @severity AND m.category = @category
GROUP BY m.what
ORDER BY tasks DESC, messages DESC, what
LIMIT @lim OFFSET @off;

-- name: ReportMessages :many
-- ReportMessages lists the messages of one what, with their tasks, by task id.
SELECT t.id, t.entry, m.details::text AS details
FROM tasks t
JOIN task_messages m ON m.task_id = t.id AND m.run = t.run
WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id AND t.status = @status
  AND m.severity = @severity AND m.category = @category AND m.what = @what
ORDER BY t.id, m.id
LIMIT @lim OFFSET @off;

-- name: ReportNoMessages :many
-- ReportNoMessages lists the tasks with a status and no message of a severity in their current
-- run, by id.
SELECT t.id, t.entry
FROM tasks t
WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id AND t.status = @status
  AND NOT EXISTS (SELECT 1 FROM task_messages m
                  WHERE m.task_id = t.id AND m.run = t.run AND m.severity = @severity)
ORDER BY t.id
LIMIT @lim OFFSET @off;

-- name: RunList :many
-- RunList lists the runs of a corpus and service, oldest first.
SELECT id, started_at, ended_at, note, tasks, todo, no_problem, warning, error, fatal, invalid,
       blocked
FROM runs
WHERE corpus_id = @corpus_id AND service_id = @service_id
ORDER BY id;

-- name: RunLockOpen :one
-- RunLockOpen takes the open run of a corpus and service.
SELECT id
FROM runs
WHERE corpus_id = @corpus_id AND service_id = @service_id AND ended_at IS NULL
ORDER BY id DESC
LIMIT 1
FOR UPDATE;

-- name: RunOpenReturning :one
INSERT INTO runs (corpus_id, service_id, started_at, note)
VALUES (@corpus_id, @service_id, @started_at::timestamptz, @note)
RETURNING id;

-- name: RunClose :exec
-- RunClose closes a run with the tallies it ended with.
UPDATE runs
SET ended_at = @ended_at::timestamptz, scope = @scope::jsonb, tasks = @tasks, todo = @todo,
    no_problem = @no_problem, warning = @warning, error = @error, fatal = @fatal,
    invalid = @invalid, blocked = @blocked
WHERE id = @id;

-- name: RunSnapshot :execrows
-- RunSnapshot records the statuses of the tasks of a corpus and service as a run's final ones.
INSERT INTO run_statuses (run_id, task_id, status)
SELECT @run_id::bigint, id, status
FROM tasks
WHERE corpus_id = @corpus_id AND service_id = @service_id;

-- name: DiffMatrixCurrent :many
-- DiffMatrixCurrent counts the tasks of a corpus and service by their status in a closed run
-- (NULL: not a task then) and their current status.
SELECT f.status AS from_status, t.status AS to_status, count(*)::bigint AS tasks
FROM tasks t
LEFT JOIN run_statuses f ON f.run_id = @from_run AND f.task_id = t.id
WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id
GROUP BY 1, 2
ORDER BY 1 DESC NULLS FIRST, 2 DESC;

-- name: DiffMatrixClosed :many
-- DiffMatrixClosed counts the tasks of a closed run by their status in an earlier closed run
-- (NULL: not a task then) and their status in it.
SELECT f.status AS from_status, r.status AS to_status, count(*)::bigint AS tasks
FROM run_statuses r
LEFT JOIN run_statuses f ON f.run_id = @from_run AND f.task_id = r.task_id
WHERE r.run_id = @to_run
GROUP BY 1, 2
ORDER BY 1 DESC NULLS FIRST, 2 DESC;

-- name: DiffCellCurrent :many
-- DiffCellCurrent lists the tasks of one cell of DiffMatrixCurrent, by id.
SELECT t.id, t.entry
FROM tasks t
LEFT JOIN run_statuses f ON f.run_id = @from_run AND f.task_id = t.id
WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id AND t.status = @to_status
  AND f.status IS NOT DISTINCT FROM sqlc.narg('from_status')::smallint
ORDER BY t.id
LIMIT @lim OFFSET @off;

-- name: DiffCellClosed :many
-- DiffCellClosed lists the tasks of one cell of DiffMatrixClosed, by id.
SELECT r.task_id AS id, coalesce(t.entry, '')::text AS entry
FROM run_statuses r
LEFT JOIN run_statuses f ON f.run_id = @from_run AND f.task_id = r.task_id
LEFT JOIN tasks t ON t.id = r.task_id
WHERE r.run_id = @to_run AND r.status = @to_status
  AND f.status IS NOT DISTINCT FROM sqlc.narg('from_status')::smallint
ORDER BY r.task_id
LIMIT @lim OFFSET @off;

-- name: SandboxCreate :one
-- SandboxCreate makes a sandbox of a corpus: a corpus of the same path with it as parent.
INSERT INTO corpora (name, path, parent_corpus_id)
SELECT @name::text, p.path, p.id
FROM corpora p
WHERE p.id = @parent_id
RETURNING id;

-- name: SandboxCopyTasks :execrows
-- SandboxCopyTasks copies the selected tasks of a corpus and service (the selection of
-- TaskRerun) into a sandbox as TODO tasks of its first run.
INSERT INTO tasks (service_id, corpus_id, entry)
SELECT s.service_id, @sandbox_id::int, s.entry
FROM tasks s
WHERE s.corpus_id = @corpus_id AND s.service_id = @service_id
  AND (sqlc.narg('statuses')::smallint[] IS NULL OR s.status = ANY(sqlc.narg('statuses')::smallint[]))
  AND (@no_messages::bool AND NOT EXISTS (
           SELECT 1 FROM task_messages m
           WHERE m.task_id = s.id AND m.run = s.run AND m.severity = sqlc.narg('severity')::text)
       OR NOT @no_messages::bool AND sqlc.narg('severity')::text IS NULL
       AND sqlc.narg('category')::text IS NULL AND sqlc.narg('what')::text IS NULL
       OR NOT @no_messages::bool AND EXISTS (
           SELECT 1 FROM task_messages m
           WHERE m.task_id = s.id AND m.run = s.run
             AND (sqlc.narg('severity')::text IS NULL OR m.severity = sqlc.narg('severity')::text)
             AND (sqlc.narg('category')::text IS NULL OR m.category = sqlc.narg('category')::text)
             AND (sqlc.narg('what')::text IS NULL OR m.what = sqlc.narg('what')::text)))
ORDER BY s.id;

-- name: SandboxList :many
-- SandboxList lists the sandboxes with their parents and tasks.
SELECT c.id, c.name, p.name AS parent, c.created_at,
       (SELECT count(*) FROM tasks t WHERE t.corpus_id = c.id)::bigint AS tasks
FROM corpora c
JOIN corpora p ON p.id = c.parent_corpus_id
ORDER BY c.id;

-- name: SandboxLock :one
-- SandboxLock takes a sandbox's corpus row, with its path.
SELECT id, path
FROM corpora
WHERE name = @name AND parent_corpus_id IS NOT NULL
FOR UPDATE;

-- name: SandboxDeleteTasks :many
-- SandboxDeleteTasks deletes a sandbox's tasks (their dispatch rows, attempts and messages go
-- with them, trigger tasks_deleted), returning each one's entry and service name.
WITH gone AS (
    DELETE FROM tasks WHERE corpus_id = @corpus_id RETURNING entry, service_id
)
SELECT g.entry, s.name AS service
FROM gone g
JOIN services s ON s.id = g.service_id;

-- name: SandboxDeleteRuns :exec
-- SandboxDeleteRuns deletes the runs of a corpus and their statuses.
WITH gone AS (
    DELETE FROM runs WHERE corpus_id = @corpus_id RETURNING id
)
DELETE FROM run_statuses r USING gone WHERE r.run_id = gone.id;

-- name: SandboxDeleteCorpus :exec
DELETE FROM corpora WHERE id = @id;
