-- What `cortexq import --from-cortex` carries over from a CorTeX database that the schema had no
-- place for (docs/operations.md, "Moving from CorTeX"):
--   corpora.description        CorTeX's description of a corpus ('' when none);
--   corpora.selection          the filter a sandbox was cut with, as CorTeX kept it (NULL: none);
--   corpora.archive_id         the id a sandbox's result archives are named after
--                              (<service>.sandbox-<archive_id>.zip); NULL: its own id. An imported
--                              sandbox keeps its CorTeX id there, so its archives are found where
--                              they are;
--   runs.owner                 who started a run (CorTeX's historical_runs.owner; '' when none);
--   corpus_entries             a corpus's source archives as CorTeX listed them (the tasks of its
--                              import service), whether or not a service has a task for them;
--   cortex_tasks               each imported task's CorTeX id, the CorTeX status it was imported
--                              with (a later import updates a task whose CorTeX status moved on
--                              while cortexq left it alone) and CorTeX's runtime of it;
--   cortex_runs                each imported run's CorTeX id (historical_runs.id).
-- All new columns are nullable or have a constant default: adding them rewrites nothing, and the
-- replicas of the release before read none of them.

-- +goose Up
ALTER TABLE corpora ADD COLUMN description text NOT NULL DEFAULT '',
                    ADD COLUMN selection jsonb,
                    ADD COLUMN archive_id integer;
COMMENT ON COLUMN corpora.archive_id IS
    'The id in the names of a sandbox''s result archives, <service>.sandbox-<archive_id>.zip (NULL: its own id).';
ALTER TABLE runs ADD COLUMN owner text NOT NULL DEFAULT '';

CREATE TABLE corpus_entries (
    corpus_id integer NOT NULL REFERENCES corpora (id) ON DELETE CASCADE,
    entry     text NOT NULL CHECK (entry <> ''),
    PRIMARY KEY (corpus_id, entry)
);
COMMENT ON TABLE corpus_entries IS 'The source archives of an imported CorTeX corpus (its import service''s tasks).';

CREATE TABLE cortex_tasks (
    task_id       bigint PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    cortex_id     bigint NOT NULL,
    cortex_status integer NOT NULL,
    runtime_ms    integer
);
COMMENT ON TABLE cortex_tasks IS 'Tasks imported from CorTeX: its task id, the status imported, and its runtime (task_runtimes).';

CREATE TABLE cortex_runs (
    run_id    bigint PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    cortex_id integer NOT NULL UNIQUE
);
COMMENT ON TABLE cortex_runs IS 'Runs imported from CorTeX: its historical_runs id.';

INSERT INTO audit_readable (name) VALUES ('corpus_entries'), ('cortex_tasks'), ('cortex_runs')
ON CONFLICT DO NOTHING;

-- +goose Down
DELETE FROM audit_readable WHERE name IN ('corpus_entries', 'cortex_tasks', 'cortex_runs');
DROP TABLE cortex_runs;
DROP TABLE cortex_tasks;
DROP TABLE corpus_entries;
ALTER TABLE runs DROP COLUMN owner;
ALTER TABLE corpora DROP COLUMN archive_id, DROP COLUMN selection, DROP COLUMN description;
