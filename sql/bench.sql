-- name: AttemptLatency :one
-- AttemptLatency is the dispatch→durable latency of a corpus's accepted results, in seconds:
-- from the lease to the claim that recorded the result.
SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM a.answered_at - a.leased_at)), 0)::float8 AS p50,
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM a.answered_at - a.leased_at)), 0)::float8 AS p99
FROM attempts a
JOIN tasks t ON t.id = a.task_id
WHERE t.corpus_id = @corpus_id AND a.outcome = 'accepted';
