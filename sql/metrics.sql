-- What the elected leader exports to Prometheus at a scrape (docs/monitoring.md): each a few
-- rows read from small tables or one index probe per corpus and service, never a count of the
-- tasks (docs/monitoring.md#cost-to-the-database).

-- name: MetricsTaskTotals :many
-- MetricsTaskTotals sums the task_totals ledger (migrations/00013_dashboard_speed.sql) per
-- corpus, service and status, with the corpus's and service's names: exact, without counting
-- the tasks.
WITH totals AS (
    SELECT corpus_id, service_id, status, sum(tasks) AS n
    FROM task_totals
    GROUP BY corpus_id, service_id, status
)
SELECT c.name AS corpus, s.name AS service, t.status, t.n::bigint AS tasks
FROM totals t
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = t.service_id
ORDER BY c.name, s.name, t.status;

-- name: MetricsOldestTodo :many
-- MetricsOldestTodo is, per corpus and service with TODO tasks (by the ledger), how long its
-- oldest TODO task has waited (todo_since, migrations/00026_todo_since.sql), in seconds: one
-- probe of the index tasks_todo_since each.
WITH waiting AS (
    SELECT corpus_id, service_id
    FROM task_totals
    WHERE status = 0
    GROUP BY corpus_id, service_id
    HAVING sum(tasks) > 0
)
SELECT c.name AS corpus, s.name AS service,
       greatest(extract(epoch FROM now() - o.todo_since), 0)::float8 AS age_seconds
FROM waiting w
CROSS JOIN LATERAL (
    SELECT t.todo_since FROM tasks t
    WHERE t.corpus_id = w.corpus_id AND t.service_id = w.service_id AND t.status = 0
    ORDER BY t.todo_since
    LIMIT 1
) o
JOIN corpora c ON c.id = w.corpus_id
JOIN services s ON s.id = w.service_id;

-- name: MetricsActiveWorkers :many
-- MetricsActiveWorkers counts, per service, the workers that asked or answered in the last
-- minute (the dashboard's definition, WebActiveWorkers); a service with none counts 0.
SELECT s.name AS service,
       count(w.name) FILTER (WHERE greatest(w.last_request, w.last_result) > now() - interval '1 minute')::bigint AS workers
FROM services s
LEFT JOIN workers w ON w.service_id = s.id
GROUP BY s.name
ORDER BY s.name;

-- name: MetricsFold :one
-- MetricsFold says how long ago the report rollups were last folded (-1: never) and how many
-- noted changes wait for the next fold, counted up to 100,000 (a count of more would cost the
-- scrape more than it tells).
SELECT coalesce(extract(epoch FROM now() - s.folded_at), -1)::float8 AS age_seconds,
       (SELECT count(*) FROM (SELECT 1 FROM report_changes LIMIT 100000) c)::bigint AS pending
FROM report_fold_state s;
