-- Run history for `cortexq runs` and `cortexq diff` (docs/reports.md).
--
-- run_statuses keeps each task's final status in each closed run: the rerun that closes a run
-- writes its statuses in one INSERT … SELECT, in the rerun's transaction, so the lease and
-- claim paths write nothing more. The current (open) run's statuses are the tasks' own. A row
-- is 18 bytes of data; the primary key serves both the diff's join by task and a cell's page by
-- task id. No foreign keys: a per-row check on a million-row insert costs more than the insert,
-- and the rows go with their runs (sandbox delete) by run id.

-- +goose Up
CREATE TABLE run_statuses (
    run_id  bigint NOT NULL,
    task_id bigint NOT NULL,
    status  smallint NOT NULL,
    PRIMARY KEY (run_id, task_id)
);
COMMENT ON TABLE run_statuses IS 'Each task''s final status in each closed run, written when a rerun closes the run.';

CREATE INDEX runs_scope ON runs (corpus_id, service_id, id);

-- +goose Down
DROP INDEX runs_scope;
DROP TABLE run_statuses;
