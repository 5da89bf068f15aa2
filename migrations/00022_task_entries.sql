-- The search's trigram index moves off tasks, into a table of its own written at import only.
--
-- 00016 put the index on tasks.entry, on the grounds that entries never change. But every task's
-- row is updated twice with a new status (reservation, claim), and status is indexed
-- (tasks_todo's predicate, tasks_corpus_service_status), so neither update is heap-only: each
-- added a task's ~50 trigrams to the GIN index's pending list, and the statement that found the
-- list full (4 MB) merged it into the index in its own time. Measured at a steady 1,000 tasks/s:
-- the claim's `Update on tasks` took 80-85 ms with 1,728 WAL records for 81 rows at those merges,
-- and the results waiting behind it made the lease → result p99 (docs/performance.md, "Latency").
--
-- task_entries holds (task_id, entry), one row a task, filled by the tasks_inserted trigger (every
-- import's statement already fires it) and emptied by tasks_deleted; an UPDATE that names entry
-- (none of cortexq's does) keeps it in step. A status update touches no row of it.

-- +goose Up
CREATE TABLE task_entries (
    task_id bigint PRIMARY KEY,
    entry   text NOT NULL
);
COMMENT ON TABLE task_entries IS 'Each task''s entry again, for the search''s trigram index: written at import, never on a status change.';
INSERT INTO task_entries (task_id, entry) SELECT id, entry FROM tasks;
CREATE INDEX task_entries_trgm ON task_entries USING gin (entry gin_trgm_ops);
DROP INDEX tasks_entry_trgm;
INSERT INTO audit_readable (name) VALUES ('task_entries');

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tasks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO corpus_shares (service_id, corpus_id)
    SELECT DISTINCT n.service_id, n.corpus_id FROM added n
    ON CONFLICT DO NOTHING;
    -- ON CONFLICT: ids restart after a TRUNCATE ... RESTART IDENTITY, which leaves this table be.
    INSERT INTO task_entries (task_id, entry)
    SELECT n.id, n.entry FROM added n
    ON CONFLICT (task_id) DO UPDATE SET entry = excluded.entry;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION tasks_inserted() IS 'Gives each new corpus and service its corpus_shares row (weight 1, priority 0) and each new task its task_entries row.';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dispatch d USING gone g WHERE d.task_id = g.id;
    DELETE FROM attempts a USING gone g WHERE a.task_id = g.id;
    DELETE FROM task_message_logs m USING gone g WHERE m.task_id = g.id;
    DELETE FROM task_entries e USING gone g WHERE e.task_id = g.id;
    INSERT INTO report_changes (task_id) SELECT g.id FROM gone g;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION task_entry_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE task_entries SET entry = NEW.entry WHERE task_id = NEW.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION task_entry_changed() IS 'Keeps task_entries in step with an UPDATE of tasks.entry (cortexq never makes one).';
-- A row trigger with a column list: it fires only for an UPDATE whose SET names entry, so the
-- status updates of the hot path never run it.
CREATE TRIGGER task_entry_changed AFTER UPDATE OF entry ON tasks
    FOR EACH ROW WHEN (OLD.entry IS DISTINCT FROM NEW.entry) EXECUTE FUNCTION task_entry_changed();

-- +goose Down
DELETE FROM audit_readable WHERE name = 'task_entries';
DROP TRIGGER task_entry_changed ON tasks;
DROP FUNCTION task_entry_changed();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dispatch d USING gone g WHERE d.task_id = g.id;
    DELETE FROM attempts a USING gone g WHERE a.task_id = g.id;
    DELETE FROM task_message_logs m USING gone g WHERE m.task_id = g.id;
    INSERT INTO report_changes (task_id) SELECT g.id FROM gone g;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tasks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO corpus_shares (service_id, corpus_id)
    SELECT DISTINCT n.service_id, n.corpus_id FROM added n
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION tasks_inserted() IS 'Gives each new corpus and service its corpus_shares row (weight 1, priority 0).';
CREATE INDEX tasks_entry_trgm ON tasks USING gin (entry gin_trgm_ops);
DROP TABLE task_entries;
