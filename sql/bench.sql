-- name: AttemptLatency :one
-- AttemptLatency is the dispatch→durable latency of a corpus's accepted results, in seconds:
-- from the lease to the claim that recorded the result.
SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM a.answered_at - a.leased_at)), 0)::float8 AS p50,
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM a.answered_at - a.leased_at)), 0)::float8 AS p99
FROM attempts a
JOIN tasks t ON t.id = a.task_id
WHERE t.corpus_id = @corpus_id AND a.outcome = 'accepted';

-- name: BenchOpen :one
-- BenchOpen is the bench's drain check, cheap enough to poll: whether a TODO task of the
-- service is left (through tasks_todo), and the service's dispatch rows still in flight or
-- queued (dispatch is small). A dispatched task always has one of those rows.
SELECT EXISTS (SELECT 1 FROM tasks t WHERE t.service_id = @service_id::int AND t.status = 0) AS todo,
       (SELECT count(*) FROM dispatch d
        WHERE d.service_id = @service_id::int AND (d.state = 'in_flight' OR d.queued))::bigint AS active,
       (SELECT count(*) FROM dispatch d
        WHERE d.service_id = @service_id::int AND d.state = 'in_flight')::bigint AS in_flight;

-- name: BenchDiscardUnfinished :execrows
-- BenchDiscardUnfinished deletes a service's unfinished tasks (TODO or dispatched), with their
-- rows (the tasks_deleted trigger): for the bench's own service, whose earlier runs may have
-- stopped before their backlog drained and removed its source archives.
DELETE FROM tasks WHERE service_id = @service_id::int AND status >= 0;
