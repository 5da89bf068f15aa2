-- What an audit role (`cortexq db grant-audit`, docs/auditing.md) may read besides the audit_*
-- views, declared beside the schema: a migration that creates a table or view an auditor should
-- read inserts its name here in the same change, and grant-audit grants SELECT on every name
-- listed (and on every audit_* view). A name dropped from the schema is deleted from here by the
-- migration that drops it.

-- +goose Up
CREATE TABLE audit_readable (
    name text PRIMARY KEY
);
COMMENT ON TABLE audit_readable IS 'The tables and views (besides audit_*) an audit role may read: cortexq db grant-audit grants SELECT on each.';
INSERT INTO audit_readable (name) VALUES
    ('services'), ('corpora'), ('tasks'), ('dispatch'), ('attempts'),
    -- task_messages is a view of task_message_logs and message_kinds (00015_message_logs.sql).
    ('task_messages'), ('task_message_logs'), ('message_kinds'),
    ('runs'), ('run_statuses'), ('workers'), ('reaper_passes'), ('worker_keys'), ('corpus_shares'),
    ('report_rollup'), ('report_fold_state'), ('report_changes'), ('report_folded'),
    ('run_diffs'), ('diff_current'), ('diff_current_state'), ('diff_touched'), ('task_totals'),
    ('replica_heartbeats'), -- 00016_search_liveness.sql: the dashboard's replica states
    ('audit_readable');

-- +goose Down
DROP TABLE audit_readable;
