-- Cheaper writes on the lease and claim paths, measured with `cortexq bench` (see README,
-- Benchmarks):
--
-- * dispatch, attempts and task_messages lose their foreign keys to tasks. Every row they gain
--   (three to four per task) fired a per-row referential check, a query of tasks, which cost
--   about a tenth of PostgreSQL's time per task. queue/lease writes those rows only in the
--   transaction that holds the task's row lock, so the task exists. What the keys also did —
--   delete a task's rows with the task — a statement trigger now does, for an operator's
--   DELETE FROM tasks.
-- * attempts keeps room on its pages, so that the claim's update of an attempt (outcome,
--   status, answered_at: no indexed column) is a HOT update, with no new index entries.

-- +goose Up
ALTER TABLE dispatch DROP CONSTRAINT IF EXISTS dispatch_task_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_task_id_fkey;
ALTER TABLE task_messages DROP CONSTRAINT IF EXISTS task_messages_task_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dispatch d USING gone g WHERE d.task_id = g.id;
    DELETE FROM attempts a USING gone g WHERE a.task_id = g.id;
    DELETE FROM task_messages m USING gone g WHERE m.task_id = g.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION tasks_deleted() IS 'Deletes the dispatch rows, attempts and messages of deleted tasks (what ON DELETE CASCADE did).';
CREATE TRIGGER tasks_deleted AFTER DELETE ON tasks
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION tasks_deleted();

ALTER TABLE attempts SET (fillfactor = 75);

-- +goose Down
ALTER TABLE attempts RESET (fillfactor);
DROP TRIGGER tasks_deleted ON tasks;
DROP FUNCTION tasks_deleted();
DELETE FROM dispatch d WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = d.task_id);
DELETE FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = a.task_id);
DELETE FROM task_messages m WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = m.task_id);
ALTER TABLE dispatch ADD CONSTRAINT dispatch_task_id_fkey
    FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE;
ALTER TABLE attempts ADD CONSTRAINT attempts_task_id_fkey
    FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE;
ALTER TABLE task_messages ADD CONSTRAINT task_messages_task_id_fkey
    FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE;
