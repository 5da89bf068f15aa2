-- Report rollups (docs/reports.md#rollups): the category and what levels of `cortexq report`
-- read counts folded ahead of time instead of joining millions of messages with their tasks.
--
-- The write paths only note which tasks changed: the claim (queue/lease's Apply statement), a
-- rerun and a deletion of tasks each add the task ids to report_changes, an append-only table
-- with no index, in the statement or transaction that changes them. A fold (a River periodic
-- job, `cortexq serve --fold-interval`) takes those ids a batch at a time and, for each task,
-- subtracts what it contributed when it was last folded (report_folded) and adds what it
-- contributes now (its status and the messages of its current run, of its status's severity).
-- Reports are as fresh as the last fold: report_fold_state says when that was.

-- +goose Up
CREATE TABLE report_changes (
    task_id bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE report_changes IS 'Tasks whose status, run or messages changed since the last report fold.';

-- What each folded task contributes to report_rollup: its status, and one entry per distinct
-- (category, what) of its messages of its status's severity in its current run, with the number
-- of those messages. A task contributing nothing has no row (a Fatal task does, to be counted
-- among the Fatal ones for the category no_messages).
CREATE TABLE report_folded (
    task_id    bigint PRIMARY KEY,
    corpus_id  integer NOT NULL,
    service_id integer NOT NULL,
    status     smallint NOT NULL,
    categories text[] NOT NULL,
    whats      text[] NOT NULL,
    messages   integer[] NOT NULL
);
COMMENT ON TABLE report_folded IS 'What each task contributed to report_rollup when it was last folded.';

-- Per corpus, service and status: level 0, the tasks with a message (category and what '');
-- level 1, per category (what ''); level 2, per category and what; level 3, the tasks of the
-- status (kept for Fatal only). tasks counts distinct tasks, messages their messages.
CREATE TABLE report_rollup (
    corpus_id  integer NOT NULL,
    service_id integer NOT NULL,
    status     smallint NOT NULL,
    level      smallint NOT NULL CHECK (level BETWEEN 0 AND 3),
    category   text NOT NULL,
    what       text NOT NULL,
    tasks      bigint NOT NULL,
    messages   bigint NOT NULL,
    PRIMARY KEY (corpus_id, service_id, status, level, category, what)
);
COMMENT ON TABLE report_rollup IS 'Task and message counts of the report''s levels, as of the last fold.';
-- The rows a fold brought to zero, which it then deletes.
CREATE INDEX report_rollup_zero ON report_rollup (corpus_id) WHERE tasks = 0 AND messages = 0;

CREATE TABLE report_fold_state (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    folded_at timestamptz
);
INSERT INTO report_fold_state (folded_at) VALUES (NULL);
COMMENT ON TABLE report_fold_state IS 'When the report rollups were last folded.';

-- Deleted tasks are changes too (their contributions go).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dispatch d USING gone g WHERE d.task_id = g.id;
    DELETE FROM attempts a USING gone g WHERE a.task_id = g.id;
    DELETE FROM task_messages m USING gone g WHERE m.task_id = g.id;
    INSERT INTO report_changes (task_id) SELECT g.id FROM gone g;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The tasks there are now are folded by the first folds.
INSERT INTO report_changes (task_id) SELECT id FROM tasks WHERE status BETWEEN -5 AND -1;

-- The messages level pages a what's messages by task: the index gives them in that order.
CREATE INDEX task_messages_what_task ON task_messages (severity, category, what, task_id, id);
DROP INDEX task_messages_what;

-- The diff reads a run's statuses from the primary key alone (an index-only scan): 0.5 s instead
-- of 1.4-2 s for a million-task run.
ALTER TABLE run_statuses DROP CONSTRAINT run_statuses_pkey,
    ADD CONSTRAINT run_statuses_pkey PRIMARY KEY (run_id, task_id) INCLUDE (status);

-- +goose Down
ALTER TABLE run_statuses DROP CONSTRAINT run_statuses_pkey,
    ADD CONSTRAINT run_statuses_pkey PRIMARY KEY (run_id, task_id);
CREATE INDEX task_messages_what ON task_messages (severity, category, what);
DROP INDEX task_messages_what_task;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dispatch d USING gone g WHERE d.task_id = g.id;
    DELETE FROM attempts a USING gone g WHERE a.task_id = g.id;
    DELETE FROM task_messages m USING gone g WHERE m.task_id = g.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TABLE report_fold_state;
DROP TABLE report_rollup;
DROP TABLE report_folded;
DROP TABLE report_changes;
