-- The corpus lifecycle (queue/catalog/lifecycle.go, docs/operations.md#corpus-lifecycle):
-- activate a service on a corpus's known entries, and delete a corpus, a service, or a
-- service's tasks of a corpus (deactivate) in bounded batches. A scope's @corpus_id or
-- @service_id of 0 stands for every corpus or every service.

-- name: LifecycleCount :one
-- LifecycleCount counts the rows a deletion of a scope would remove, per table: the tasks and
-- every row keyed by their ids, then the rows keyed by the corpus or service. corpus_entries
-- count when the corpus goes (@drop_corpus), workers and service_demand when the service goes
-- (@drop_service); runs are kept (runs_detached: the runs that would lose their corpus or
-- service id, their names and tallies kept).
WITH t AS (
    SELECT id FROM tasks
    WHERE (@corpus_id::int = 0 OR corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR service_id = @service_id::int)
)
SELECT (SELECT count(*) FROM t)::bigint AS tasks,
       (SELECT count(*) FROM dispatch x WHERE x.task_id IN (SELECT id FROM t))::bigint AS dispatch,
       (SELECT count(*) FROM attempts x WHERE x.task_id IN (SELECT id FROM t))::bigint AS attempts,
       (SELECT count(*) FROM task_message_logs x WHERE x.task_id IN (SELECT id FROM t))::bigint AS task_message_logs,
       (SELECT count(*) FROM task_entries x WHERE x.task_id IN (SELECT id FROM t))::bigint AS task_entries,
       (SELECT count(*) FROM run_statuses x WHERE x.task_id IN (SELECT id FROM t))::bigint AS run_statuses,
       (SELECT count(*) FROM cortex_tasks x WHERE x.task_id IN (SELECT id FROM t))::bigint AS cortex_tasks,
       (SELECT count(*) FROM report_folded x WHERE x.task_id IN (SELECT id FROM t)
           OR ((@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int)))::bigint AS report_folded,
       (SELECT count(*) FROM diff_touched x WHERE x.task_id IN (SELECT id FROM t)
           OR ((@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int)))::bigint AS diff_touched,
       (SELECT count(*) FROM corpus_shares x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int))::bigint AS corpus_shares,
       (SELECT count(*) FROM task_totals x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int))::bigint AS task_totals,
       (SELECT count(*) FROM report_rollup x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int))::bigint AS report_rollup,
       (SELECT count(*) FROM report_all_rollup x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int))::bigint AS report_all_rollup,
       (SELECT count(*) FROM run_diffs x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int))::bigint AS run_diffs,
       (SELECT count(*) FROM diff_current x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int))::bigint AS diff_current,
       (SELECT count(*) FROM diff_current_state x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int))::bigint AS diff_current_state,
       (SELECT count(*) FROM corpus_entries x WHERE @drop_corpus::bool AND x.corpus_id = @corpus_id::int)::bigint AS corpus_entries,
       (SELECT count(*) FROM workers x WHERE @drop_service::bool AND x.service_id = @service_id::int)::bigint AS workers,
       (SELECT count(*) FROM service_demand x WHERE @drop_service::bool AND x.service_id = @service_id::int)::bigint AS service_demand,
       (SELECT count(*) FROM runs x WHERE (@drop_corpus::bool OR @drop_service::bool)
           AND (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int))::bigint AS runs_detached;

-- name: LifecycleFoldLock :exec
-- LifecycleFoldLock waits for the report fold's lock (ReportFoldLock) and holds it for the
-- transaction: a fold that read a task's contribution before it was deleted would otherwise
-- subtract it from rollups the deletion already removed.
SELECT pg_advisory_xact_lock(hashtext('cortexq report fold'));

-- name: LifecycleCloseRuns :execrows
-- LifecycleCloseRuns closes the open runs of a scope with the tallies they end with (from the
-- task_totals ledger), noting why.
UPDATE runs r
SET ended_at = now(), note = CASE WHEN r.note = '' THEN @note::text ELSE r.note || '; ' || @note::text END,
    (tasks, todo, no_problem, warning, error, fatal, invalid, blocked) = (
        SELECT coalesce(sum(t.tasks), 0), coalesce(sum(t.tasks) FILTER (WHERE t.status = 0), 0),
               coalesce(sum(t.tasks) FILTER (WHERE t.status = -1), 0), coalesce(sum(t.tasks) FILTER (WHERE t.status = -2), 0),
               coalesce(sum(t.tasks) FILTER (WHERE t.status = -3), 0), coalesce(sum(t.tasks) FILTER (WHERE t.status = -4), 0),
               coalesce(sum(t.tasks) FILTER (WHERE t.status = -5), 0), coalesce(sum(t.tasks) FILTER (WHERE t.status <= -6), 0)
        FROM task_totals t
        WHERE t.corpus_id = r.corpus_id AND t.service_id = r.service_id)
WHERE r.ended_at IS NULL
  AND (@corpus_id::int = 0 OR r.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR r.service_id = @service_id::int);

-- name: LifecycleTaskBatch :many
-- LifecycleTaskBatch takes the next @batch tasks of a scope, lowest ids first, with their entry
-- service name and corpus path (the result archives --files removes).
SELECT t.id, t.entry, s.name AS service, c.path AS corpus_path
FROM tasks t
JOIN services s ON s.id = t.service_id
JOIN corpora c ON c.id = t.corpus_id
WHERE (@corpus_id::int = 0 OR t.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR t.service_id = @service_id::int)
ORDER BY t.id
LIMIT @batch::int
FOR UPDATE OF t;

-- name: LifecycleDeleteTaskRows :one
-- LifecycleDeleteTaskRows deletes the rows keyed by the tasks @ids, counting them per table
-- (the tasks themselves go next: LifecycleDeleteTasks).
WITH d AS (DELETE FROM dispatch WHERE task_id = ANY (@ids::bigint[]) RETURNING 1),
     a AS (DELETE FROM attempts WHERE task_id = ANY (@ids::bigint[]) RETURNING 1),
     m AS (DELETE FROM task_message_logs WHERE task_id = ANY (@ids::bigint[]) RETURNING 1),
     e AS (DELETE FROM task_entries WHERE task_id = ANY (@ids::bigint[]) RETURNING 1),
     s AS (DELETE FROM run_statuses WHERE task_id = ANY (@ids::bigint[]) RETURNING 1),
     c AS (DELETE FROM cortex_tasks WHERE task_id = ANY (@ids::bigint[]) RETURNING 1),
     f AS (DELETE FROM report_folded WHERE task_id = ANY (@ids::bigint[]) RETURNING 1),
     x AS (DELETE FROM diff_touched WHERE task_id = ANY (@ids::bigint[]) RETURNING 1)
SELECT (SELECT count(*) FROM d)::bigint AS dispatch, (SELECT count(*) FROM a)::bigint AS attempts,
       (SELECT count(*) FROM m)::bigint AS task_message_logs, (SELECT count(*) FROM e)::bigint AS task_entries,
       (SELECT count(*) FROM s)::bigint AS run_statuses, (SELECT count(*) FROM c)::bigint AS cortex_tasks,
       (SELECT count(*) FROM f)::bigint AS report_folded, (SELECT count(*) FROM x)::bigint AS diff_touched;

-- name: LifecycleDeleteTasks :execrows
-- LifecycleDeleteTasks deletes the tasks @ids (trigger tasks_deleted notes them in
-- report_changes, which LifecycleForgetChanges then clears).
DELETE FROM tasks WHERE id = ANY (@ids::bigint[]);

-- name: LifecycleForgetChanges :exec
-- LifecycleForgetChanges drops the report fold's notes of the deleted tasks @ids: their folded
-- contributions are gone with them.
DELETE FROM report_changes WHERE task_id = ANY (@ids::bigint[]);

-- name: LifecycleDeleteScopeRows :one
-- LifecycleDeleteScopeRows deletes the rows keyed by a scope's corpus and service once its tasks
-- are gone, counting them per table; with @drop_corpus the corpus's known entries too, with
-- @drop_service the service's workers and demand. Runs stay (LifecycleDetachCorpusRuns and LifecycleDetachServiceRuns).
WITH sh AS (DELETE FROM corpus_shares x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int) RETURNING 1),
     tt AS (DELETE FROM task_totals x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int) RETURNING 1),
     rr AS (DELETE FROM report_rollup x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int) RETURNING 1),
     ra AS (DELETE FROM report_all_rollup x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int) RETURNING 1),
     rf AS (DELETE FROM report_folded x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int) RETURNING 1),
     rd AS (DELETE FROM run_diffs x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int) RETURNING 1),
     dc AS (DELETE FROM diff_current x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int) RETURNING 1),
     ds AS (DELETE FROM diff_current_state x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int) RETURNING 1),
     dt AS (DELETE FROM diff_touched x WHERE (@corpus_id::int = 0 OR x.corpus_id = @corpus_id::int) AND (@service_id::int = 0 OR x.service_id = @service_id::int) RETURNING 1),
     ce AS (DELETE FROM corpus_entries x WHERE @drop_corpus::bool AND x.corpus_id = @corpus_id::int RETURNING 1),
     wk AS (DELETE FROM workers x WHERE @drop_service::bool AND x.service_id = @service_id::int RETURNING 1),
     sd AS (DELETE FROM service_demand x WHERE @drop_service::bool AND x.service_id = @service_id::int RETURNING 1)
SELECT (SELECT count(*) FROM sh)::bigint AS corpus_shares, (SELECT count(*) FROM tt)::bigint AS task_totals,
       (SELECT count(*) FROM rr)::bigint AS report_rollup, (SELECT count(*) FROM ra)::bigint AS report_all_rollup,
       (SELECT count(*) FROM rf)::bigint AS report_folded, (SELECT count(*) FROM rd)::bigint AS run_diffs,
       (SELECT count(*) FROM dc)::bigint AS diff_current, (SELECT count(*) FROM ds)::bigint AS diff_current_state,
       (SELECT count(*) FROM dt)::bigint AS diff_touched, (SELECT count(*) FROM ce)::bigint AS corpus_entries,
       (SELECT count(*) FROM wk)::bigint AS workers, (SELECT count(*) FROM sd)::bigint AS service_demand;

-- name: LifecycleDetachCorpusRuns :execrows
-- LifecycleDetachCorpusRuns keeps the runs of a corpus that goes, by name (runs.corpus_name).
UPDATE runs SET corpus_id = NULL WHERE corpus_id = @corpus_id::int;

-- name: LifecycleDetachServiceRuns :execrows
-- LifecycleDetachServiceRuns keeps the runs of a service that goes, by name (runs.service_name).
UPDATE runs SET service_id = NULL WHERE service_id = @service_id::int;

-- name: LifecycleDeleteCorpus :execrows
DELETE FROM corpora WHERE id = @id::int;

-- name: LifecycleDeleteService :execrows
DELETE FROM services WHERE id = @id::int;

-- name: LifecycleCorpus :one
-- LifecycleCorpus finds a corpus by name, with its path, its parent (0: none, not a sandbox)
-- and its sandboxes' count.
SELECT c.id, c.path, coalesce(c.parent_corpus_id, 0)::int AS parent,
       (SELECT count(*) FROM corpora s WHERE s.parent_corpus_id = c.id)::bigint AS sandboxes
FROM corpora c
WHERE c.name = @name;

-- name: LifecycleSources :many
-- LifecycleSources lists where a corpus's known entries are: the services with tasks in it
-- (from the task_totals ledger) and, as service 0, its known entries (corpus_entries), each
-- with how many.
SELECT t.service_id, sum(t.tasks)::bigint AS entries
FROM task_totals t
WHERE t.corpus_id = @corpus_id::int
GROUP BY t.service_id
HAVING sum(t.tasks) > 0
UNION ALL
SELECT 0, count(*)::bigint FROM corpus_entries e WHERE e.corpus_id = @corpus_id::int
ORDER BY 1;

-- name: LifecycleActivateFromTasks :one
-- LifecycleActivateFromTasks adds a task of @service_id for each of the next @batch entries of
-- the corpus's tasks of @from_service after @after (entry order), keeping their source's size
-- and time; last is the last entry taken ('' when none was left).
WITH b AS (
    SELECT t.entry, t.source_size, t.source_mtime
    FROM tasks t
    WHERE t.corpus_id = @corpus_id::int AND t.service_id = @from_service::int AND t.entry > @after::text
    ORDER BY t.entry
    LIMIT @batch::int
), ins AS (
    INSERT INTO tasks (corpus_id, service_id, entry, source_size, source_mtime)
    SELECT @corpus_id::int, @service_id::int, b.entry, b.source_size, b.source_mtime FROM b
    ORDER BY b.entry
    ON CONFLICT (corpus_id, service_id, entry) DO NOTHING
    RETURNING 1
)
SELECT coalesce((SELECT max(b.entry) FROM b), '')::text AS last, (SELECT count(*) FROM b)::bigint AS taken,
       (SELECT count(*) FROM ins)::bigint AS added;

-- name: LifecycleActivateFromEntries :one
-- LifecycleActivateFromEntries is LifecycleActivateFromTasks for the corpus's known entries
-- (corpus_entries).
WITH b AS (
    SELECT e.entry
    FROM corpus_entries e
    WHERE e.corpus_id = @corpus_id::int AND e.entry > @after::text
    ORDER BY e.entry
    LIMIT @batch::int
), ins AS (
    INSERT INTO tasks (corpus_id, service_id, entry)
    SELECT @corpus_id::int, @service_id::int, b.entry FROM b
    ORDER BY b.entry
    ON CONFLICT (corpus_id, service_id, entry) DO NOTHING
    RETURNING 1
)
SELECT coalesce((SELECT max(b.entry) FROM b), '')::text AS last, (SELECT count(*) FROM b)::bigint AS taken,
       (SELECT count(*) FROM ins)::bigint AS added;

-- name: LifecycleActiveServices :many
-- LifecycleActiveServices lists the services with tasks in a corpus (the ones extend adds to).
SELECT s.id, s.name
FROM services s
WHERE EXISTS (SELECT 1 FROM tasks t WHERE t.corpus_id = @corpus_id::int AND t.service_id = s.id)
ORDER BY s.name;
