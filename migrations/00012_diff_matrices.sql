-- Stored diff matrices (docs/reports.md#diff-matrices): `cortexq diff` reads counts kept ahead of time
-- instead of joining a million tasks with their statuses in an earlier run (0.45 s, more under
-- load).
--
-- run_diffs: the matrix of two closed runs, counted once on first use and kept (closed runs
-- never change: run_statuses holds their statuses).
--
-- diff_current: per corpus and service, the matrix of the last closed run and the open one,
-- kept by the report fold. Each task is counted in one cell: (its status in the closed run,
-- NULL if it was no task then; its status when last counted). A task's counted cell is its
-- diff_touched row of the scope's generation if it has one, else (for a task of the closed run)
-- its status in that run, twice: right after a rerun most tasks still have the status they
-- ended the run with, so only the tasks that moved need a row. The fold recounts the tasks it is
-- noted (report_changes); a sweep recounts the tasks whose status is not final (leases, expiries
-- and pauses change those without a note); a reset (after a rerun) counts everything afresh
-- under a new generation. Sweeps and resets are rate-limited to about 1/20 of a core.

-- +goose Up
CREATE TABLE run_diffs (
    corpus_id   integer NOT NULL,
    service_id  integer NOT NULL,
    from_run    bigint NOT NULL,
    to_run      bigint NOT NULL,
    from_status smallint,
    to_status   smallint NOT NULL,
    tasks       bigint NOT NULL,
    CONSTRAINT run_diffs_cell UNIQUE NULLS NOT DISTINCT (from_run, to_run, from_status, to_status)
);
COMMENT ON TABLE run_diffs IS 'Status transition matrices of two closed runs (from_status NULL: not a task then), counted on first use.';

CREATE TABLE diff_current (
    corpus_id   integer NOT NULL,
    service_id  integer NOT NULL,
    from_status smallint,
    to_status   smallint NOT NULL,
    tasks       bigint NOT NULL,
    CONSTRAINT diff_current_cell UNIQUE NULLS NOT DISTINCT (corpus_id, service_id, from_status, to_status)
);
COMMENT ON TABLE diff_current IS 'Status transition matrix of the last closed run and the open one, per corpus and service, kept by the report fold.';

CREATE TABLE diff_current_state (
    corpus_id     integer NOT NULL,
    service_id    integer NOT NULL,
    from_run      bigint NOT NULL,
    to_run        bigint NOT NULL,
    gen           bigint NOT NULL,
    counted_at    timestamptz NOT NULL,
    swept_at      timestamptz NOT NULL,
    next_sweep_at timestamptz NOT NULL,
    PRIMARY KEY (corpus_id, service_id)
);
COMMENT ON TABLE diff_current_state IS 'Which runs diff_current compares per corpus and service, its generation, and when it was last counted and swept.';
CREATE SEQUENCE diff_gen;

CREATE TABLE diff_touched (
    task_id     bigint PRIMARY KEY,
    corpus_id   integer NOT NULL,
    service_id  integer NOT NULL,
    gen         bigint NOT NULL,
    from_status smallint,
    to_status   smallint
) WITH (autovacuum_vacuum_scale_factor = 0.05);
-- A cell's tasks that left their closed-run status, by id: the pages of `diff --from-status X
-- --to-status Y` (X not Y) read them here instead of scanning every task for a rare cell.
CREATE INDEX diff_touched_cell ON diff_touched (gen, to_status, coalesce(from_status, -128), task_id);
COMMENT ON TABLE diff_touched IS 'The diff_current cell a task is counted in, when it is not its closed-run status twice (to_status NULL: counted nowhere); rows of an older generation are void.';

-- +goose Down
DROP TABLE diff_touched;
DROP SEQUENCE diff_gen;
DROP TABLE diff_current_state;
DROP TABLE diff_current;
DROP TABLE run_diffs;
