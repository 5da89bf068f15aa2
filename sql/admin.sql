-- Queries of the operator commands (cmd/cortexq through queue/lease/admin.go): services, import,
-- pause and resume, progress and a task's history.

-- name: ServiceList :many
SELECT * FROM services ORDER BY name;

-- name: CorpusCreateIfMissing :one
-- CorpusCreateIfMissing creates a corpus; no row comes back when one of that name exists.
INSERT INTO corpora (name, path)
VALUES (@name, @path)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: CorpusLockForImport :one
-- CorpusLockForImport serializes imports into a corpus until the transaction ends, and reports
-- its path. A row lock, not an advisory one: it needs UPDATE on corpora, which a read-only
-- (audit) role cannot take to hold imports up; NO KEY UPDATE lets tasks referencing the corpus
-- be inserted meanwhile.
SELECT path FROM corpora WHERE id = @id FOR NO KEY UPDATE;

-- name: TaskImport :execrows
-- TaskImport adds TODO tasks for the entries not yet known for the corpus and service; entries
-- already there (the unique corpus, service, entry constraint) are skipped. Each entry's size and
-- modification time are what `cortexq verify` compares the source with later (a size below 0:
-- not recorded).
INSERT INTO tasks (corpus_id, service_id, entry, source_size, source_mtime)
SELECT @corpus_id::int, @service_id::int, k.e, CASE WHEN k.size >= 0 THEN k.size END,
       CASE WHEN k.size >= 0 THEN k.mtime END
FROM (SELECT unnest(@entries::text[]) AS e, unnest(@sizes::bigint[]) AS size,
             unnest(@mtimes::timestamptz[]) AS mtime) AS k
ON CONFLICT (corpus_id, service_id, entry) DO NOTHING;

-- name: RunOpenIfNone :execrows
-- RunOpenIfNone opens a run row for a corpus and service that has none open.
INSERT INTO runs (corpus_id, service_id, started_at, note)
SELECT @corpus_id::int, @service_id::int, @started_at::timestamptz, @note::text
WHERE NOT EXISTS (
    SELECT 1 FROM runs
    WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int AND ended_at IS NULL
);

-- name: DispatchLockReservedOfScope :many
-- DispatchLockReservedOfScope takes the reservations of every replica on the tasks of a corpus
-- and service, with their tasks, for a pause to take them back.
SELECT sqlc.embed(d), t.run AS task_run, t.status AS task_status
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
WHERE d.state = 'reserved' AND d.service_id = @service_id AND t.corpus_id = @corpus_id
  AND t.service_id = @service_id
ORDER BY d.task_id
FOR UPDATE OF d, t;

-- name: TaskPause :execrows
-- TaskPause blocks the TODO tasks of a corpus and service; leased work goes on.
UPDATE tasks
SET status = -6
WHERE corpus_id = @corpus_id AND service_id = @service_id AND status = 0;

-- name: TaskResume :execrows
-- TaskResume puts the blocked tasks of a corpus and service back to TODO, waiting from now
-- (todo_since).
UPDATE tasks
SET status = 0, todo_since = now()
WHERE corpus_id = @corpus_id AND service_id = @service_id AND status = -6;

-- name: TaskProgress :many
-- TaskProgress tallies every corpus and service (or the one named): tasks by status, dispatch
-- rows by state (reserved, in flight, settling, queued), dead letters of the current runs, and
-- replies and leases over the last minute, with each corpus's share of its service's leases.
WITH tally AS (
    SELECT corpus_id, service_id,
           count(*) AS tasks,
           count(*) FILTER (WHERE status = 0) AS todo,
           count(*) FILTER (WHERE status = 1) AS dispatched,
           count(*) FILTER (WHERE status = -1) AS no_problem,
           count(*) FILTER (WHERE status = -2) AS warning,
           count(*) FILTER (WHERE status = -3) AS error,
           count(*) FILTER (WHERE status = -4) AS fatal,
           count(*) FILTER (WHERE status = -5) AS invalid,
           count(*) FILTER (WHERE status <= -6) AS blocked
    FROM tasks
    GROUP BY corpus_id, service_id
), rows AS (
    SELECT t.corpus_id, t.service_id,
           count(*) FILTER (WHERE d.state = 'reserved') AS reserved,
           count(*) FILTER (WHERE d.state = 'in_flight') AS in_flight,
           count(*) FILTER (WHERE d.state = 'settling' AND NOT d.queued) AS settling,
           count(*) FILTER (WHERE d.queued) AS queued
    FROM dispatch d
    JOIN tasks t ON t.id = d.task_id
    GROUP BY t.corpus_id, t.service_id
)
SELECT c.name AS corpus, s.name AS service, tally.corpus_id, tally.service_id,
       tally.tasks::bigint AS tasks, tally.todo::bigint AS todo,
       tally.dispatched::bigint AS dispatched,
       coalesce(rows.reserved, 0)::bigint AS reserved,
       coalesce(rows.in_flight, 0)::bigint AS in_flight,
       coalesce(rows.settling, 0)::bigint AS settling,
       coalesce(rows.queued, 0)::bigint AS queued,
       coalesce(act.dead_letters, 0)::bigint AS dead_letters,
       tally.no_problem::bigint AS no_problem, tally.warning::bigint AS warning,
       tally.error::bigint AS error, tally.fatal::bigint AS fatal,
       tally.invalid::bigint AS invalid, tally.blocked::bigint AS blocked,
       coalesce(act.replies_last_minute, 0)::bigint AS replies_last_minute,
       coalesce(act.leases_last_minute, 0)::bigint AS leases_last_minute,
       coalesce(act.lease_share_last_minute, 0)::float8 AS lease_share_last_minute
FROM tally
JOIN corpora c ON c.id = tally.corpus_id
JOIN services s ON s.id = tally.service_id
LEFT JOIN rows ON rows.corpus_id = tally.corpus_id AND rows.service_id = tally.service_id
-- Dead letters and the last minute: audit_corpus_activity (migrations/00014_corpus_activity.sql).
LEFT JOIN audit_corpus_activity act ON act.corpus_id = tally.corpus_id AND act.service_id = tally.service_id
WHERE (sqlc.narg('corpus')::text IS NULL OR c.name = sqlc.narg('corpus')::text)
  AND (sqlc.narg('service')::text IS NULL OR s.name = sqlc.narg('service')::text)
ORDER BY c.name, s.name;

-- name: TaskDetail :one
SELECT t.id, t.entry, t.status, t.run, t.corpus_id, c.name AS corpus, t.service_id, s.name AS service
FROM tasks t
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = t.service_id
WHERE t.id = @id;

-- name: DispatchListForTask :many
SELECT * FROM dispatch WHERE task_id = @task_id ORDER BY run;

-- name: AttemptListForTask :many
-- The columns the task's history shows (queue/inspect), named: a column added to attempts
-- changes nothing here until the history shows it.
SELECT run, attempt, worker, replica, leased_at, answered_at, outcome, status, stages
FROM attempts WHERE task_id = @task_id ORDER BY run, attempt;

-- name: MessageListForTask :many
-- MessageListForTask lists a task's messages, at most lim of them (NULL: all): task_messages
-- (migrations/00015_message_logs.sql, 00025_usual_details.sql) written out, each run's log cut to its first lim messages
-- before they are unnested and looked up, so the task page reads the first thousand messages of
-- a task holding a million without looking up the million (11.5 s before, docs/web.md#cost-to-the-database).
-- The kinds and the details are unnested together, a detail a row: a row carrying the whole
-- details array (a lateral subquery subscripted per message) costs as many copies of the array
-- as messages wherever the plan hashes or materializes the rows (docs/web.md#hostile-results).
SELECT x.n::bigint AS id, l.task_id, l.run, k.severity, k.category, k.what,
       (CASE WHEN l.details IS NULL THEN ''
             ELSE coalesce(x.detail, k.usual_details, '') END)::text AS details
FROM task_message_logs l
CROSS JOIN LATERAL ROWS FROM (unnest((l.kinds[1:coalesce(sqlc.narg('lim')::int, cardinality(l.kinds))])::int[]),
                              unnest((l.details[1:coalesce(sqlc.narg('lim')::int, cardinality(l.kinds))])::text[]))
    WITH ORDINALITY AS x (kind, detail, n)
JOIN message_kinds k ON k.id = x.kind
WHERE l.task_id = @task_id
ORDER BY l.run, x.n
LIMIT sqlc.narg('lim');

-- name: TasksAnalyze :exec
-- TasksAnalyze refreshes the planner's statistics of tasks after a large import.
ANALYZE tasks;

-- name: CorpusShareSet :one
-- CorpusShareSet sets the fair-share weight and priority of a corpus and service; a NULL leaves
-- the value as it is (the default for a corpus and service with no row yet).
INSERT INTO corpus_shares (service_id, corpus_id, weight, priority)
VALUES (@service_id::int, @corpus_id::int, coalesce(sqlc.narg(weight)::int, 1), coalesce(sqlc.narg(priority)::int, 0))
ON CONFLICT (service_id, corpus_id) DO UPDATE
SET weight = coalesce(sqlc.narg(weight)::int, corpus_shares.weight),
    priority = coalesce(sqlc.narg(priority)::int, corpus_shares.priority)
RETURNING weight, priority;

-- name: CorpusShareList :many
-- CorpusShareList lists the fair share of every corpus and service (or those of one service):
-- weight, priority, TODO tasks, and the leases over the last minute with the corpus's share of
-- its service's.
WITH recent AS (
    SELECT t.corpus_id, t.service_id, count(*) AS leases
    FROM attempts a
    JOIN tasks t ON t.id = a.task_id
    WHERE a.leased_at > now() - interval '1 minute'
    GROUP BY t.corpus_id, t.service_id
)
SELECT c.name AS corpus, s.name AS service, (c.parent_corpus_id IS NOT NULL)::bool AS sandbox,
       cs.weight, cs.priority,
       (SELECT count(*) FROM tasks t
        WHERE t.service_id = cs.service_id AND t.corpus_id = cs.corpus_id AND t.status = 0)::bigint AS todo,
       coalesce(r.leases, 0)::bigint AS leases_last_minute,
       coalesce(r.leases::float8 / nullif(sum(r.leases) OVER (PARTITION BY cs.service_id), 0), 0)::float8 AS lease_share_last_minute
FROM corpus_shares cs
JOIN corpora c ON c.id = cs.corpus_id
JOIN services s ON s.id = cs.service_id
LEFT JOIN recent r ON r.corpus_id = cs.corpus_id AND r.service_id = cs.service_id
WHERE (sqlc.narg('service')::text IS NULL OR s.name = sqlc.narg('service')::text)
ORDER BY s.name, cs.priority DESC, c.name;
