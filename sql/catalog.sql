-- name: ServiceByName :one
SELECT * FROM services WHERE name = @name;

-- name: ServiceCreate :one
INSERT INTO services (name, lease_timeout_seconds)
VALUES (@name, sqlc.narg('lease_timeout_seconds'))
RETURNING *;

-- name: CorpusByName :one
SELECT * FROM corpora WHERE name = @name;

-- name: CorpusByID :one
SELECT * FROM corpora WHERE id = @id;

-- name: CorpusPaths :many
-- CorpusPaths lists the distinct paths of all corpora (sandboxes share their parent's).
SELECT DISTINCT path FROM corpora ORDER BY path;

-- name: CorpusCreate :one
INSERT INTO corpora (name, path, parent_corpus_id)
VALUES (@name, @path, sqlc.narg('parent_corpus_id'))
RETURNING *;

-- name: DispatchCountInFlight :one
-- DispatchCountInFlight counts a replica's in-flight rows (all replicas' when replica is NULL).
SELECT count(*)::bigint FROM dispatch
WHERE state = 'in_flight' AND (sqlc.narg('replica')::text IS NULL OR replica = sqlc.narg('replica')::text);

-- name: TaskInfo :many
-- TaskInfo looks up what the sink needs to place results of tasks it does not mirror.
SELECT t.id, t.service_id, t.corpus_id, t.entry, t.run, t.status, s.name AS service_name,
       CASE WHEN c.parent_corpus_id IS NULL THEN 0 ELSE coalesce(c.archive_id, c.id) END::int AS sandbox_id
FROM tasks t
JOIN services s ON s.id = t.service_id
JOIN corpora c ON c.id = t.corpus_id
WHERE t.id = ANY(@ids::bigint[]);

-- name: DispatchInFlightOfReplica :many
-- DispatchInFlightOfReplica lists a replica's in-flight rows, to resync its hot mirror. worker is
-- the row's current worker (the last of attempt_workers), whose unanswered leases the mirror
-- counts. The OFFSET 0 keeps the task lookup per row (docs/performance.md#query-shapes).
SELECT d.task_id, d.run, d.service_id, t.corpus_id, t.entry,
       coalesce(d.attempt_workers[cardinality(d.attempt_workers)], '')::text AS worker
FROM dispatch d
CROSS JOIN LATERAL (SELECT corpus_id, entry FROM tasks WHERE id = d.task_id OFFSET 0) AS t
WHERE d.state = 'in_flight' AND NOT d.answered AND d.replica = @replica;

-- name: DispatchCounts :one
SELECT count(*) FILTER (WHERE state = 'reserved')::bigint AS reserved,
       count(*) FILTER (WHERE state = 'in_flight')::bigint AS in_flight,
       count(*) FILTER (WHERE state = 'settling')::bigint AS settling,
       count(*) FILTER (WHERE queued)::bigint AS queued,
       count(*) FILTER (WHERE dead_lettered AND finished_attempt IS NULL)::bigint AS dead_lettered
FROM dispatch;

-- name: ReaperLastPass :one
-- ReaperLastPass is when any replica last recorded a reaper pass (NULL: never).
SELECT count(*)::bigint AS passes, coalesce(max(at), 'epoch')::timestamptz AS at FROM reaper_passes;
