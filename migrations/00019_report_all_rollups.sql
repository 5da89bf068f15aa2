-- Report rollups at scale (docs/reports.md#rollups, docs/performance.md#reports-on-compact-messages-at-scale).
--
-- The report's "all tasks" view (docs/reports.md#all-tasks: a severity's messages in every task
-- whatever its status) read the messages themselves, a pass over the corpus's logs (3.6 s at
-- 100,000 tasks). The fold now keeps its counts too, in report_all_rollup, as report_rollup
-- keeps those of each status: per corpus, service and severity, level 0 the tasks with a
-- message of the severity (category and what ''), level 1 per category (what ''), level 2 per
-- category and what.
--
-- The messages level (one what's messages, by task) unnested the log of every task having the
-- what (635 ms for a frequent what at 1,000,000 tasks). report_folded now also keeps, for each
-- folded task, the kinds (message_kinds ids, ascending) of its current run's log, of every
-- severity, with their counts: the page finds its tasks there, through a GIN index on kinds
-- for a what of few tasks, or walking the corpus's tasks in id order (report_folded_scope) for a
-- frequent one, and reads the logs of that page's tasks only. The fold writes both; the claim
-- is unchanged.
--
-- Every task with a final status is noted for the next fold, which fills the new columns and
-- the new rollup (what it subtracts first has no kinds).

-- +goose Up
ALTER TABLE report_folded
    ADD COLUMN kinds integer[] NOT NULL DEFAULT '{}',
    ADD COLUMN counts integer[] NOT NULL DEFAULT '{}';
COMMENT ON COLUMN report_folded.kinds IS 'The message_kinds ids of the task''s current run''s log when last folded, every severity, ascending.';
COMMENT ON COLUMN report_folded.counts IS 'The messages of each of kinds, in the same order.';
CREATE INDEX report_folded_kinds ON report_folded USING gin (kinds);
CREATE INDEX report_folded_scope ON report_folded (corpus_id, service_id, task_id);

CREATE TABLE report_all_rollup (
    corpus_id  integer NOT NULL,
    service_id integer NOT NULL,
    severity   text NOT NULL,
    level      smallint NOT NULL CHECK (level BETWEEN 0 AND 2),
    category   text NOT NULL,
    what       text NOT NULL,
    tasks      bigint NOT NULL,
    messages   bigint NOT NULL,
    PRIMARY KEY (corpus_id, service_id, level, severity, category, what)
);
COMMENT ON TABLE report_all_rollup IS 'Task and message counts of the all-tasks report''s levels (a severity in tasks of every status), as of the last fold.';
-- The rows a fold brought to zero, which it then deletes.
CREATE INDEX report_all_rollup_zero ON report_all_rollup (corpus_id) WHERE tasks = 0 AND messages = 0;

INSERT INTO report_changes (task_id) SELECT id FROM tasks WHERE status BETWEEN -5 AND -1;

INSERT INTO audit_readable (name) VALUES ('report_all_rollup');

-- +goose Down
DELETE FROM audit_readable WHERE name = 'report_all_rollup';
DROP TABLE report_all_rollup;
DROP INDEX report_folded_scope;
DROP INDEX report_folded_kinds;
ALTER TABLE report_folded DROP COLUMN counts, DROP COLUMN kinds;
