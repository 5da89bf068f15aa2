-- Queries on worker_keys, the CURVE allow-list.

-- name: WorkerKeysAllowed :many
-- WorkerKeysAllowed lists the keys that are let in now.
SELECT public_key, name FROM worker_keys WHERE revoked_at IS NULL;

-- name: WorkerKeysAll :many
-- WorkerKeysAll lists every key, revoked ones included, newest first.
SELECT * FROM worker_keys ORDER BY added_at DESC, public_key;

-- name: WorkerKeyAllow :one
-- WorkerKeyAllow adds a key, or names and re-allows a key already on record.
INSERT INTO worker_keys (public_key, name)
VALUES (@public_key, @name)
ON CONFLICT (public_key) DO UPDATE
SET name = excluded.name,
    revoked_at = NULL,
    added_at = CASE WHEN worker_keys.revoked_at IS NULL THEN worker_keys.added_at ELSE now() END
RETURNING *;

-- name: WorkerKeyRevoke :many
-- WorkerKeyRevoke revokes the allowed keys that have the public key, or the name, given.
UPDATE worker_keys
SET revoked_at = now()
WHERE revoked_at IS NULL
  AND (public_key = sqlc.narg('public_key')::text OR name = sqlc.narg('name')::text)
RETURNING *;

-- name: DispatchHeldByKey :one
-- DispatchHeldByKey reports whether a worker of a key (its names start with key_prefix,
-- 'key:<name>/') holds an attempt of the task in a dispatch row: the sink's check, before it
-- parses a CURVE result, that the sender may answer the task at all.
SELECT EXISTS (
    SELECT 1 FROM dispatch d, unnest(d.attempt_workers) AS w
    WHERE d.task_id = @task_id AND starts_with(w, @key_prefix::text)
)::bool AS held;
