-- name: AttemptLatency :one
-- AttemptLatency is the dispatch→durable latency of a corpus's accepted results, in seconds:
-- from the lease to the claim that recorded the result.
SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM a.answered_at - a.leased_at)), 0)::float8 AS p50,
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM a.answered_at - a.leased_at)), 0)::float8 AS p99
FROM attempts a
JOIN tasks t ON t.id = a.task_id
WHERE t.corpus_id = @corpus_id AND a.outcome = 'accepted';

-- name: BenchOpen :one
-- BenchOpen is the bench's drain check, polled every 20 ms once the fleet has converted every
-- task: whether a TODO task of the service is left or a dispatch row of it in flight, reserved
-- or queued. ORDER BY ... LIMIT 1, not EXISTS, so the planner walks the partial indexes
-- (tasks_todo, dispatch_one_active) (docs/performance.md#query-shapes).
SELECT ((SELECT t.id FROM tasks t
         WHERE t.service_id = @service_id::int AND t.status = 0
         ORDER BY t.service_id, t.corpus_id, t.id LIMIT 1) IS NOT NULL)::bool AS todo,
       ((SELECT d.task_id FROM dispatch d
         WHERE d.service_id = @service_id::int AND (d.state IN ('in_flight', 'reserved') OR d.queued)
         ORDER BY d.task_id LIMIT 1) IS NOT NULL)::bool AS active;

-- name: BenchDiscardUnfinished :execrows
-- BenchDiscardUnfinished deletes a service's unfinished tasks (TODO or dispatched), with their
-- rows (the tasks_deleted trigger): for the bench's own service, whose earlier runs may have
-- stopped before their backlog drained and removed its source archives.
DELETE FROM tasks WHERE service_id = @service_id::int AND status >= 0;

-- name: BenchGenerateTasks :execrows
-- BenchGenerateTasks adds TODO tasks numbered first to last to a corpus, in the database alone:
-- the entries are named as the bench stages its archives (dir/NNNNNN/source.zip), in id order,
-- whether an archive is there or not. For `cortexq bench --corpora`, whose large backlogs are
-- never drained: only the archives the run can reach are staged.
INSERT INTO tasks (service_id, corpus_id, entry)
SELECT @service_id::int, @corpus_id::int, @dir::text || '/' || lpad(g::text, greatest(6, length(g::text)), '0') || '/source.zip'
FROM generate_series(@first::int, @last::int) AS g
ORDER BY g;

-- name: BenchCorpusDone :one
-- BenchCorpusDone counts a corpus's NoProblem tasks of a service, and gives the seconds from
-- since to its last accepted result.
SELECT (SELECT count(*) FROM tasks t
        WHERE t.corpus_id = @corpus_id::int AND t.service_id = @service_id::int AND t.status = -1)::bigint AS no_problem,
       coalesce((SELECT extract(epoch FROM max(a.answered_at) - @since::timestamptz)
                 FROM attempts a JOIN tasks t ON t.id = a.task_id
                 WHERE t.corpus_id = @corpus_id::int AND t.service_id = @service_id::int AND a.outcome = 'accepted'), 0)::float8 AS last_s;

-- name: BenchMessageStorage :one
-- BenchMessageStorage gives the bytes that hold log messages, all in (task_message_logs and
-- message_kinds: tables, indexes, TOAST), and the messages they hold.
SELECT (pg_total_relation_size('task_message_logs') + pg_total_relation_size('message_kinds'))::bigint AS bytes,
       coalesce((SELECT sum(cardinality(kinds)) FROM task_message_logs), 0)::bigint AS messages;
