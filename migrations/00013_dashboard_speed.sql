-- The dashboard's speed at a million tasks (docs/web.md#cost-to-the-database).
--
-- Task totals: the dashboard's live figures, the report's first level and the current run's tally
-- read the number of tasks per corpus, service and status from task_totals, a few rows, instead
-- of counting a million tasks.
--
-- task_totals is a ledger of signed counts: statement-level triggers on tasks append one row per
-- (corpus, service, status) a statement moved tasks into or out of, with no index and no row
-- updated, so two claims never wait on each other for it. A total is the sum of its rows; the
-- report fold (FoldReports) compacts them into one row each. The claim's statements pay one
-- trigger call each (docs/performance.md: cortexq bench before and after).

-- +goose Up
CREATE TABLE task_totals (
    corpus_id  integer NOT NULL,
    service_id integer NOT NULL,
    status     smallint NOT NULL,
    tasks      bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE task_totals IS 'Signed counts of tasks per corpus, service and status: a total is the sum of its rows.';

-- +goose StatementBegin
CREATE FUNCTION task_totals_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_totals (corpus_id, service_id, status, tasks)
    SELECT corpus_id, service_id, status, count(*) FROM totals_added GROUP BY 1, 2, 3;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION task_totals_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_totals (corpus_id, service_id, status, tasks)
    SELECT d.corpus_id, d.service_id, d.status, sum(d.n)
    FROM totals_before o
    JOIN totals_after a ON a.id = o.id
    CROSS JOIN LATERAL (VALUES (o.corpus_id, o.service_id, o.status, -1),
                               (a.corpus_id, a.service_id, a.status, 1)) AS d (corpus_id, service_id, status, n)
    WHERE (o.corpus_id, o.service_id, o.status) IS DISTINCT FROM (a.corpus_id, a.service_id, a.status)
    GROUP BY d.corpus_id, d.service_id, d.status
    HAVING sum(d.n) <> 0;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION task_totals_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_totals (corpus_id, service_id, status, tasks)
    SELECT corpus_id, service_id, status, -count(*) FROM totals_gone GROUP BY 1, 2, 3;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION task_totals_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM task_totals;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The triggers lock tasks against writes until this migration commits: the totals counted
-- below are exact.
CREATE TRIGGER task_totals_inserted AFTER INSERT ON tasks REFERENCING NEW TABLE AS totals_added
    FOR EACH STATEMENT EXECUTE FUNCTION task_totals_inserted();
CREATE TRIGGER task_totals_updated AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS totals_before NEW TABLE AS totals_after
    FOR EACH STATEMENT EXECUTE FUNCTION task_totals_updated();
CREATE TRIGGER task_totals_deleted AFTER DELETE ON tasks REFERENCING OLD TABLE AS totals_gone
    FOR EACH STATEMENT EXECUTE FUNCTION task_totals_deleted();
CREATE TRIGGER task_totals_truncated AFTER TRUNCATE ON tasks
    FOR EACH STATEMENT EXECUTE FUNCTION task_totals_truncated();

INSERT INTO task_totals (corpus_id, service_id, status, tasks)
SELECT corpus_id, service_id, status, count(*) FROM tasks GROUP BY 1, 2, 3;

-- A task's messages in order (the task page's first thousand of a million) straight from the
-- index, instead of sorting them all: the index on (task_id, run) it replaces, with id (as wide
-- to write, one index either way).
CREATE INDEX task_messages_task_run ON task_messages (task_id, run, id);
DROP INDEX task_messages_task;

-- +goose Down
CREATE INDEX task_messages_task ON task_messages (task_id, run);
DROP INDEX task_messages_task_run;
DROP TRIGGER task_totals_truncated ON tasks;
DROP TRIGGER task_totals_deleted ON tasks;
DROP TRIGGER task_totals_updated ON tasks;
DROP TRIGGER task_totals_inserted ON tasks;
DROP FUNCTION task_totals_truncated();
DROP FUNCTION task_totals_deleted();
DROP FUNCTION task_totals_updated();
DROP FUNCTION task_totals_inserted();
DROP TABLE task_totals;
