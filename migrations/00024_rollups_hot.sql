-- The fold updates the same few hundred rollup rows in every batch (one per category, what and
-- severity it touches). The partial indexes on their zero rows (00011, 00019) made none of those
-- updates heap-only: tasks and messages are in the indexes' predicate, so each update added a
-- row version to the primary key as well (measured: 0 HOT updates of 6,120; ~45 µs an upsert
-- of report_all_rollup). The fold now drops the rows it brought to zero itself, by key
-- (queue/reports/foldbatch.go), and the tables leave room on each page for the next versions.

-- +goose Up
DELETE FROM report_rollup WHERE tasks = 0 AND messages = 0;
DELETE FROM report_all_rollup WHERE tasks = 0 AND messages = 0;
DROP INDEX report_rollup_zero;
DROP INDEX report_all_rollup_zero;
ALTER TABLE report_rollup SET (fillfactor = 50);
ALTER TABLE report_all_rollup SET (fillfactor = 50);

-- +goose Down
ALTER TABLE report_all_rollup RESET (fillfactor);
ALTER TABLE report_rollup RESET (fillfactor);
CREATE INDEX report_all_rollup_zero ON report_all_rollup (corpus_id) WHERE tasks = 0 AND messages = 0;
CREATE INDEX report_rollup_zero ON report_rollup (corpus_id) WHERE tasks = 0 AND messages = 0;
