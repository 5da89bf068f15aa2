-- Task totals (migrations/00013_task_totals.sql): tasks per corpus, service and status, read
-- from a ledger the triggers on tasks append to, compacted by the report fold.

-- name: TaskTotalsCompact :execrows
-- TaskTotalsCompact sums each corpus, service and status's rows of task_totals into one (none
-- for a zero), in one statement: a reader sees the rows before or after, the same sums.
WITH gone AS (
    DELETE FROM task_totals RETURNING corpus_id, service_id, status, tasks
)
INSERT INTO task_totals (corpus_id, service_id, status, tasks)
SELECT corpus_id, service_id, status, sum(tasks)
FROM gone
GROUP BY corpus_id, service_id, status
HAVING sum(tasks) <> 0;

-- name: TotalsProgress :many
-- TotalsProgress is TaskProgress with the tasks by status read from task_totals instead of
-- counted, and without the figures read from the attempts trail (TotalsActivity): for the
-- dashboard's overview and its live figures, every corpus and service with tasks.
WITH totals AS (
    SELECT corpus_id, service_id, status, sum(tasks) AS n
    FROM task_totals
    GROUP BY corpus_id, service_id, status
), tally AS (
    SELECT corpus_id, service_id,
           sum(n) AS tasks,
           coalesce(sum(n) FILTER (WHERE status = 0), 0) AS todo,
           coalesce(sum(n) FILTER (WHERE status = 1), 0) AS dispatched,
           coalesce(sum(n) FILTER (WHERE status = -1), 0) AS no_problem,
           coalesce(sum(n) FILTER (WHERE status = -2), 0) AS warning,
           coalesce(sum(n) FILTER (WHERE status = -3), 0) AS error,
           coalesce(sum(n) FILTER (WHERE status = -4), 0) AS fatal,
           coalesce(sum(n) FILTER (WHERE status = -5), 0) AS invalid,
           coalesce(sum(n) FILTER (WHERE status <= -6), 0) AS blocked
    FROM totals
    GROUP BY corpus_id, service_id
    HAVING sum(n) > 0
), rows AS (
    -- Each dispatch row's corpus looked up by its task's id (its service is its own): a join
    -- let the planner read every task to hash them (2.4 s at a million tasks and 13,000 rows).
    SELECT (SELECT t.corpus_id FROM tasks t WHERE t.id = d.task_id) AS corpus_id, d.service_id,
           count(*) FILTER (WHERE d.state = 'reserved') AS reserved,
           count(*) FILTER (WHERE d.state = 'in_flight') AS in_flight,
           count(*) FILTER (WHERE d.state = 'settling' AND NOT d.queued) AS settling,
           count(*) FILTER (WHERE d.queued) AS queued
    FROM dispatch d
    GROUP BY 1, 2
)
SELECT c.name AS corpus, s.name AS service, tally.corpus_id, tally.service_id,
       tally.tasks::bigint AS tasks, tally.todo::bigint AS todo,
       tally.dispatched::bigint AS dispatched,
       coalesce(rows.reserved, 0)::bigint AS reserved,
       coalesce(rows.in_flight, 0)::bigint AS in_flight,
       coalesce(rows.settling, 0)::bigint AS settling,
       coalesce(rows.queued, 0)::bigint AS queued,
       tally.no_problem::bigint AS no_problem, tally.warning::bigint AS warning,
       tally.error::bigint AS error, tally.fatal::bigint AS fatal,
       tally.invalid::bigint AS invalid, tally.blocked::bigint AS blocked
FROM tally
JOIN corpora c ON c.id = tally.corpus_id
JOIN services s ON s.id = tally.service_id
LEFT JOIN rows ON rows.corpus_id = tally.corpus_id AND rows.service_id = tally.service_id
ORDER BY c.name, s.name;

-- name: TotalsActivity :many
-- TotalsActivity is the rest of TaskProgress, read from the attempts trail through
-- audit_corpus_activity: dead letters of the current runs, replies and leases over the last
-- minute, each corpus's share of its service's leases. On millions of attempts it takes a
-- second: the dashboard reads it in the background.
SELECT corpus_id::int AS corpus_id, service_id::int AS service_id,
       dead_letters::bigint AS dead_letters,
       replies_last_minute::bigint AS replies_last_minute,
       leases_last_minute::bigint AS leases_last_minute,
       lease_share_last_minute::float8 AS lease_share_last_minute
FROM audit_corpus_activity;
