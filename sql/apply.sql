-- name: Apply :exec
-- Apply writes one transaction's decided changes in a single statement: dispatch rows deleted
-- and upserted (a JSON array of whole rows), task statuses, attempts dropped, added and
-- finished, a run's messages replaced, and the tasks changed noted for the report's fold. Each
-- part is a no-op when its arrays are empty. The parts touch distinct rows (queue/lease
-- guarantees it), as one statement must.
--
-- Each part that joins a table to its keys also restricts the table by `= ANY` of the key ids,
-- an index condition any plan applies: the claim runs this statement with a generic plan that
-- may have been made on nearly empty tables. See docs/performance.md#plan-cache.
WITH dispatch_deleted AS (
    DELETE FROM dispatch d
    USING (SELECT unnest(@del_task_ids::bigint[]) AS task_id, unnest(@del_runs::int[]) AS run) AS k
    WHERE d.task_id = k.task_id AND d.run = k.run AND d.task_id = ANY(@del_task_ids::bigint[])
), dispatch_written AS (
    INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, answered, finished_attempt,
                          finished_status, queued, replica, service_id, retries, lease_timeout_seconds,
                          leased_at, dead_lettered, last_cause, forget_at, received_at)
    SELECT r.task_id, r.run, r.state, r.attempt_workers, r.deadline, r.answered, r.finished_attempt,
           r.finished_status, r.queued, r.replica, r.service_id, r.retries, r.lease_timeout_seconds,
           r.leased_at, r.dead_lettered, r.last_cause, r.forget_at, r.received_at
    FROM jsonb_populate_recordset(NULL::dispatch, @upserts::jsonb) AS r
    ON CONFLICT (task_id, run) DO UPDATE SET
        state = excluded.state, attempt_workers = excluded.attempt_workers,
        deadline = excluded.deadline, answered = excluded.answered,
        finished_attempt = excluded.finished_attempt, finished_status = excluded.finished_status,
        queued = excluded.queued, replica = excluded.replica, retries = excluded.retries,
        lease_timeout_seconds = excluded.lease_timeout_seconds, leased_at = excluded.leased_at,
        dead_lettered = excluded.dead_lettered, last_cause = excluded.last_cause,
        forget_at = excluded.forget_at, received_at = excluded.received_at
), tasks_set AS (
    UPDATE tasks t
    SET status = k.status, run = k.run
    FROM (SELECT unnest(@task_ids::bigint[]) AS id, unnest(@task_statuses::smallint[]) AS status,
                 unnest(@task_runs::int[]) AS run) AS k
    WHERE t.id = k.id AND t.id = ANY(@task_ids::bigint[])
), attempts_dropped AS (
    DELETE FROM attempts a
    USING (SELECT unnest(@drop_task_ids::bigint[]) AS task_id, unnest(@drop_runs::int[]) AS run,
                  unnest(@drop_attempts::int[]) AS attempt) AS k
    WHERE a.task_id = k.task_id AND a.run = k.run AND a.attempt = k.attempt
      AND a.task_id = ANY(@drop_task_ids::bigint[])
), attempt_changes AS (
    -- Every attempt this transaction adds or finishes, one element each across the @att_
    -- arrays: new ones (a hand-out's attribution; a reply for a reserved task, recorded at its
    -- claim with its outcome) are inserted, the others updated. A field of an attempt is one
    -- array here and one column in each of the two parts below. An outcome of '' is none yet
    -- (NULL), a status of 0 none (the row's stands), a replica of '' is @replica, a result size
    -- below -1 none recorded (the row's stands), as are NULL stages.
    SELECT unnest(@att_task_ids::bigint[]) AS task_id, unnest(@att_runs::int[]) AS run,
           unnest(@att_attempts::int[]) AS attempt, unnest(@att_new::bool[]) AS new,
           unnest(@att_workers::text[]) AS worker, unnest(@att_replicas::text[]) AS replica,
           unnest(@att_leased_ats::timestamptz[]) AS leased_at,
           unnest(@att_outcomes::text[]) AS outcome, unnest(@att_statuses::smallint[]) AS status,
           unnest(@att_result_sizes::bigint[]) AS result_size,
           unnest(@att_result_digests::bytea[]) AS result_digest,
           unnest(@att_stages::bytea[]) AS stages
), attempts_added AS (
    -- Inserted with their outcome: attempts_finished cannot see rows this statement inserts.
    INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, outcome, status, answered_at,
                          result_size, result_digest, stages)
    SELECT k.task_id, k.run, k.attempt, k.worker, coalesce(nullif(k.replica, ''), @replica::text), k.leased_at,
           nullif(k.outcome, ''), nullif(k.status, 0), CASE WHEN k.outcome <> '' THEN @now::timestamptz END,
           CASE WHEN k.result_size >= -1 THEN k.result_size END, k.result_digest, k.stages
    FROM attempt_changes k
    WHERE k.new
), attempts_finished AS (
    UPDATE attempts a
    SET outcome = CASE WHEN a.outcome = 'accepted' AND k.outcome IN ('superseded', 'stale')
                       THEN a.outcome ELSE k.outcome END,
        status = CASE WHEN k.status = 0 THEN a.status ELSE k.status END,
        answered_at = CASE WHEN k.outcome IN ('expired', 'dead_lettered', 'replaced')
                           THEN a.answered_at ELSE coalesce(a.answered_at, @now::timestamptz) END,
        -- The archive of an accepted result (migrations/00030_result_digests.sql): what
        -- `cortexq verify` compares the file with.
        result_size = CASE WHEN k.result_size >= -1 THEN k.result_size ELSE a.result_size END,
        result_digest = CASE WHEN k.result_size >= -1 THEN k.result_digest ELSE a.result_digest END,
        -- Its stage times (migrations/00034_attempt_stages.sql).
        stages = coalesce(k.stages, a.stages)
    FROM attempt_changes k
    WHERE NOT k.new AND a.task_id = k.task_id AND a.run = k.run AND a.attempt = k.attempt
      AND a.task_id = ANY(@att_task_ids::bigint[])
), messages_written AS (
    -- A run's log, one row (migrations/00015_message_logs.sql): its message_kinds ids, the
    -- slice [kind_from:kind_to] of @msg_kinds, and its details, one text per log in
    -- @msg_details joined by that log's separator in @msg_detail_seps (empty: every detail is
    -- empty, NULL stored), which queue/lease chose to occur in none of them. One text a log
    -- rather than one element a message: a hundred messages' details cost one parameter
    -- element to encode and receive, not a hundred (docs/performance.md, "Messages"). Where
    -- @msg_elided is set, an empty element stands for its kind's usual details and is stored
    -- as NULL (migrations/00025_usual_details.sql): queue/lease sets it only for a log with no
    -- empty details of a kind whose usual ones are not empty. A log with no message deletes the
    -- row instead.
    INSERT INTO task_message_logs AS m (task_id, run, kinds, details)
    SELECT k.task_id, k.run, (@msg_kinds::int[])[k.kind_from:k.kind_to],
           CASE WHEN k.detail_sep <> ''
                THEN string_to_array(k.details, k.detail_sep, CASE WHEN k.elided THEN '' END) END
    FROM (SELECT unnest(@msg_task_ids::bigint[]) AS task_id, unnest(@msg_runs::int[]) AS run,
                 unnest(@msg_kind_from::int[]) AS kind_from, unnest(@msg_kind_to::int[]) AS kind_to,
                 unnest(@msg_details::text[]) AS details, unnest(@msg_detail_seps::text[]) AS detail_sep,
                 unnest(@msg_elided::bool[]) AS elided) AS k
    WHERE k.kind_to >= k.kind_from
    ON CONFLICT (task_id, run) DO UPDATE SET kinds = excluded.kinds, details = excluded.details
), messages_cleared AS (
    DELETE FROM task_message_logs m
    USING (SELECT unnest(@msg_task_ids::bigint[]) AS task_id, unnest(@msg_runs::int[]) AS run,
                  unnest(@msg_kind_from::int[]) AS kind_from, unnest(@msg_kind_to::int[]) AS kind_to) AS k
    WHERE m.task_id = k.task_id AND m.run = k.run AND k.kind_to < k.kind_from
      AND m.task_id = ANY(@msg_task_ids::bigint[])
), report_noted AS (
    -- The tasks given a final status (and with it their messages: a claim or a dead letter),
    -- for the report's next fold (migrations/00011_report_rollups.sql): one row each in an
    -- append-only table.
    INSERT INTO report_changes (task_id)
    SELECT k.id
    FROM (SELECT unnest(@task_ids::bigint[]) AS id, unnest(@task_statuses::smallint[]) AS status) AS k
    WHERE k.status BETWEEN -5 AND -1
)
SELECT 1;

-- name: WorkersTally :exec
-- WorkersTally adds a replica's worker counters of the last second, kept out of the lease and
-- claim transactions: every one of those would otherwise update (and lock) the worker's row.
-- A zero time (0001-01-01) stands for none.
INSERT INTO workers AS w (name, service_id, first_seen, last_request, last_result, dispatched, results)
SELECT k.name, k.service_id, k.first_seen,
       nullif(k.last_request, '0001-01-01 00:00:00+00'), nullif(k.last_result, '0001-01-01 00:00:00+00'),
       k.dispatched, k.results
FROM (SELECT unnest(@names::text[]) AS name, unnest(@service_ids::int[]) AS service_id,
             unnest(@first_seens::timestamptz[]) AS first_seen,
             unnest(@last_requests::timestamptz[]) AS last_request,
             unnest(@last_results::timestamptz[]) AS last_result,
             unnest(@dispatched::bigint[]) AS dispatched, unnest(@results::bigint[]) AS results) AS k
ORDER BY k.name, k.service_id
ON CONFLICT (name, service_id) DO UPDATE
SET first_seen = least(w.first_seen, excluded.first_seen),
    last_request = greatest(w.last_request, excluded.last_request),
    last_result = greatest(w.last_result, excluded.last_result),
    dispatched = w.dispatched + excluded.dispatched,
    results = w.results + excluded.results;

-- name: WorkersAsked :exec
-- WorkersAsked moves the last request of workers on record that asked for work in the last
-- second, leased or not (a worker polling an empty queue is alive). Workers never leased
-- anything are not added.
UPDATE workers AS w
SET last_request = greatest(w.last_request, k.at)
FROM (SELECT unnest(@names::text[]) AS name, unnest(@service_ids::int[]) AS service_id,
             unnest(@ats::timestamptz[]) AS at
      ORDER BY 1, 2) AS k
WHERE w.name = k.name AND w.service_id = k.service_id
  AND (w.last_request IS NULL OR w.last_request < k.at);

-- name: ReplicaHeartbeat :exec
-- ReplicaHeartbeat notes that a replica is up (stopped false), or that it stopped cleanly.
INSERT INTO replica_heartbeats AS h (replica, started_at, seen_at, stopped)
VALUES (@replica, now(), now(), @stopped)
ON CONFLICT (replica) DO UPDATE
SET seen_at = now(), stopped = excluded.stopped,
    started_at = CASE WHEN h.stopped THEN now() ELSE h.started_at END;

-- name: DemandNote :many
-- DemandNote notes a replica's requests per second for each service and returns the service's
-- whole demand: the replica's own rate plus the other replicas' notes of the last few seconds
-- (docs/performance.md#replicas-sharing-one-database). Rows are written in key order.
WITH mine AS (
    SELECT unnest(@service_ids::int[]) AS service_id, unnest(@rates::float8[]) AS rate
), noted AS (
    INSERT INTO service_demand AS d (service_id, replica, requests_per_s, seen_at)
    SELECT m.service_id, @replica::text, m.rate, now() FROM mine m
    ORDER BY m.service_id
    ON CONFLICT (service_id, replica) DO UPDATE
    SET requests_per_s = excluded.requests_per_s, seen_at = excluded.seen_at
)
SELECT m.service_id::int AS service_id,
       (m.rate + coalesce((SELECT sum(o.requests_per_s) FROM service_demand o
                           WHERE o.service_id = m.service_id AND o.replica <> @replica::text
                             AND o.seen_at > now() - make_interval(secs => @fresh_seconds::float8)), 0))::float8 AS total
FROM mine m;

-- name: ReplicaHeartbeatOf :many
-- ReplicaHeartbeatOf reads a replica name's last heartbeat (none: no row), with the database clock.
SELECT h.seen_at, h.stopped, now()::timestamptz AS now
FROM replica_heartbeats h
WHERE h.replica = @replica;
