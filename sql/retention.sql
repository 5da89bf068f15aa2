-- Queries of `cortexq runs prune` (docs/operations.md#retention): dropping the history of old
-- runs of a corpus and service in batches, each its own statement, so that no transaction holds
-- a million rows' locks. The current run and the last closed one (that the kept diff compares the
-- current run with) are never dropped; the caller picks the runs.

-- name: RunScopesWithHistory :many
-- RunScopesWithHistory lists the corpora and services that have runs, optionally one of them.
SELECT r.corpus_id::int AS corpus_id, r.service_id::int AS service_id, c.name AS corpus, s.name AS service
FROM (SELECT DISTINCT corpus_id, service_id FROM runs) r
JOIN corpora c ON c.id = r.corpus_id
JOIN services s ON s.id = r.service_id
WHERE (sqlc.narg('corpus_id')::int IS NULL OR r.corpus_id = sqlc.narg('corpus_id')::int)
  AND (sqlc.narg('service_id')::int IS NULL OR r.service_id = sqlc.narg('service_id')::int)
ORDER BY r.corpus_id, r.service_id;

-- name: RunsOfScopeOldestFirst :many
-- RunsOfScopeOldestFirst lists a corpus and service's runs, oldest first.
SELECT id, started_at, ended_at FROM runs
WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int
ORDER BY id;

-- name: RunStatusesCountOfRuns :one
-- RunStatusesCountOfRuns counts the kept statuses of some runs.
SELECT count(*) FROM run_statuses WHERE run_id = ANY(@run_ids::bigint[]);

-- name: RunStatusesDeleteBatch :execrows
-- RunStatusesDeleteBatch deletes up to lim kept statuses of a run, in task order (its primary key).
DELETE FROM run_statuses
WHERE run_id = @run_id::bigint AND task_id IN (
    SELECT task_id FROM run_statuses WHERE run_id = @run_id::bigint ORDER BY task_id LIMIT @lim::int
);

-- name: RunDiffsCountOfRuns :one
-- RunDiffsCountOfRuns counts the stored matrix cells that compare one of some runs.
SELECT count(*) FROM run_diffs WHERE from_run = ANY(@run_ids::bigint[]) OR to_run = ANY(@run_ids::bigint[]);

-- name: RunDiffsDeleteOfRuns :execrows
-- RunDiffsDeleteOfRuns deletes the stored matrix cells that compare one of some runs.
DELETE FROM run_diffs WHERE from_run = ANY(@run_ids::bigint[]) OR to_run = ANY(@run_ids::bigint[]);

-- name: RunsDeleteClosed :execrows
-- RunsDeleteClosed deletes some closed runs' rows (never an open one).
DELETE FROM runs WHERE id = ANY(@run_ids::bigint[]) AND ended_at IS NOT NULL;

-- name: TaskIDRangeOfScope :one
-- TaskIDRangeOfScope returns the lowest and highest task id of a corpus and service.
SELECT coalesce(min(id), 0)::bigint AS lo, coalesce(max(id), 0)::bigint AS hi
FROM tasks WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int;

-- name: TaskHistoryPruneBatch :one
-- TaskHistoryPruneBatch drops, for the tasks of a corpus and service with ids in (after, upto],
-- the attempts of their earlier runs (not the task's current run) leased before a time, and the
-- message logs of their earlier runs with no attempt leased since; with dry, it only counts them.
WITH b AS (
    SELECT id, run FROM tasks
    WHERE id > @after::bigint AND id <= @upto::bigint
      AND corpus_id = @corpus_id::int AND service_id = @service_id::int
), old_attempts AS (
    SELECT a.task_id, a.run, a.attempt FROM attempts a JOIN b ON a.task_id = b.id
    WHERE a.run < b.run AND a.leased_at < @before::timestamptz
), old_logs AS (
    SELECT m.task_id, m.run FROM task_message_logs m JOIN b ON m.task_id = b.id
    WHERE m.run < b.run AND NOT EXISTS (
        SELECT 1 FROM attempts a
        WHERE a.task_id = m.task_id AND a.run = m.run AND a.leased_at >= @before::timestamptz)
), da AS (
    DELETE FROM attempts a USING old_attempts o
    WHERE NOT @dry::bool AND a.task_id = o.task_id AND a.run = o.run AND a.attempt = o.attempt
    RETURNING 1
), dm AS (
    DELETE FROM task_message_logs m USING old_logs o
    WHERE NOT @dry::bool AND m.task_id = o.task_id AND m.run = o.run
    RETURNING 1
)
SELECT (SELECT count(*) FROM old_attempts)::bigint AS attempts,
       (SELECT count(*) FROM old_logs)::bigint AS message_logs,
       (SELECT count(*) FROM da)::bigint AS attempts_deleted,
       (SELECT count(*) FROM dm)::bigint AS message_logs_deleted;

-- name: ReaperPassesPrune :execrows
-- ReaperPassesPrune deletes up to @lim reaper passes older than @keep_seconds (at the database
-- clock, or @now), never the last one (replicas watch it to reap in a missing leader's stead).
DELETE FROM reaper_passes
WHERE id IN (
    SELECT p.id FROM reaper_passes p
    WHERE p.at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @keep_seconds::float8)
      AND p.at < (SELECT max(at) FROM reaper_passes)
    ORDER BY p.id
    LIMIT @lim::int
);

-- name: WorkersPrune :execrows
-- WorkersPrune deletes up to @lim workers not seen (first seen, asked, answered) for @keep_seconds:
-- a worker process that restarted under a new name, or left. attempts keeps their names.
DELETE FROM workers w
USING (
    SELECT x.name, x.service_id FROM workers x
    WHERE greatest(x.first_seen, x.last_request, x.last_result)
          < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @keep_seconds::float8)
    ORDER BY x.name, x.service_id
    LIMIT @lim::int
) k
WHERE w.name = k.name AND w.service_id = k.service_id;

-- name: TablesCount :one
-- TablesCount counts the rows of the tables prune bounds by age.
SELECT (SELECT count(*) FROM reaper_passes)::bigint AS reaper_passes,
       (SELECT count(*) FROM workers)::bigint AS workers,
       (SELECT count(*) FROM message_kinds)::bigint AS message_kinds;
