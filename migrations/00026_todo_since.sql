-- When each TODO task began to wait, for cortexq_oldest_todo_age_seconds (docs/monitoring.md).
--
-- tasks.todo_since is set when a task is imported (its default), rerun or resumed; a reservation
-- given back leaves it as it was (the task waited all along). Rows that exist when this runs get
-- the migration's time: their ages count from the upgrade. The partial index finds the oldest
-- TODO task of a corpus and service in one index probe; only moves into TODO write to it.
--
-- Expand only: a binary of an earlier release neither reads nor writes the column (its reruns
-- and resumes leave todo_since older than the wait, which a later rerun or resume sets right).
-- The ADD COLUMN is metadata only (a default that is not volatile is evaluated once and stored
-- in the catalog), its lock held for milliseconds; the index is built concurrently. Run again from
-- its start after a stop halfway, every statement is safe to repeat, and a build that failed is
-- dropped before it is made again (docs/operations.md#online-migrations).

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS todo_since timestamptz NOT NULL DEFAULT now();
COMMENT ON COLUMN tasks.todo_since IS 'When the task last became TODO by an import, rerun or resume.';
DROP INDEX CONCURRENTLY IF EXISTS tasks_todo_since;
CREATE INDEX CONCURRENTLY tasks_todo_since ON tasks (corpus_id, service_id, todo_since) WHERE status = 0;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_todo_since;
ALTER TABLE tasks DROP COLUMN IF EXISTS todo_since;
