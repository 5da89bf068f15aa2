-- name: AttemptLatency :one
-- AttemptLatency is the dispatch→durable latency of a corpus's accepted results, in seconds:
-- from the lease to the claim that recorded the result.
SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM a.answered_at - a.leased_at)), 0)::float8 AS p50,
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM a.answered_at - a.leased_at)), 0)::float8 AS p99
FROM attempts a
JOIN tasks t ON t.id = a.task_id
WHERE t.corpus_id = @corpus_id AND a.outcome = 'accepted';

-- name: BenchOpen :one
-- BenchOpen is the bench's cheap drain check: tasks of a corpus and service not yet terminal
-- (through tasks_corpus_service_status) and this service's leases in flight (dispatch is small).
SELECT (SELECT count(*) FROM tasks t
        WHERE t.corpus_id = @corpus_id::int AND t.service_id = @service_id::int AND t.status IN (0, 1))::bigint AS open,
       (SELECT count(*) FROM dispatch d
        WHERE d.service_id = @service_id::int AND d.state = 'in_flight')::bigint AS in_flight;
