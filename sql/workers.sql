-- name: WorkerNoteDispatched :exec
-- WorkerNoteDispatched counts leases per worker (names sorted by the caller: no deadlocks).
INSERT INTO workers AS w (name, service_id, first_seen, last_request, dispatched)
SELECT k.name, @service_id::int, @now::timestamptz, @now::timestamptz, k.n
FROM (SELECT unnest(@names::text[]) AS name, unnest(@counts::bigint[]) AS n) AS k
ON CONFLICT (name, service_id) DO UPDATE
SET last_request = excluded.last_request, dispatched = w.dispatched + excluded.dispatched;

-- name: WorkerNoteResults :exec
-- WorkerNoteResults counts results per worker and service (sorted by the caller).
INSERT INTO workers AS w (name, service_id, first_seen, last_result, results)
SELECT k.name, k.service_id, @now::timestamptz, @now::timestamptz, k.n
FROM (SELECT unnest(@names::text[]) AS name, unnest(@service_ids::int[]) AS service_id, unnest(@counts::bigint[]) AS n) AS k
ON CONFLICT (name, service_id) DO UPDATE
SET last_result = excluded.last_result, results = w.results + excluded.results;
