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

-- name: CorpusCreate :one
INSERT INTO corpora (name, path, parent_corpus_id)
VALUES (@name, @path, sqlc.narg('parent_corpus_id'))
RETURNING *;

-- name: ServiceByID :one
SELECT * FROM services WHERE id = @id;

-- name: DispatchCountInFlight :one
-- DispatchCountInFlight counts a replica's in-flight rows (all replicas' when replica is NULL).
SELECT count(*)::bigint FROM dispatch
WHERE state = 'in_flight' AND (sqlc.narg('replica')::text IS NULL OR replica = sqlc.narg('replica')::text);
