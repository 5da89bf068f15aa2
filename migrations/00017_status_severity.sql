-- The report's vocabulary in SQL. status_severity: the severity of the messages the report counts for a task of a final status: one definition
-- for the queries (sql/report.sql), mirrored in Go by the report vocabulary's table
-- (queue/severity.go, reportSeverities); a test checks that the two agree. NULL for a status
-- that is not final (todo, dispatched, blocked).

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION status_severity(status smallint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE status
        WHEN -1 THEN 'info'
        WHEN -2 THEN 'warning'
        WHEN -3 THEN 'error'
        WHEN -4 THEN 'fatal'
        WHEN -5 THEN 'invalid'
    END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION status_severity(smallint) IS 'The severity of the messages the report counts for a task of a final status (NULL: not final).';

-- The levels of report_rollup (00011_report_rollups.sql), named for the queries that read and
-- write them (sql/report.sql): IMMUTABLE SQL functions of no argument, which the planner inlines
-- as the constants they return.
CREATE FUNCTION rollup_messaged() RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 0::smallint $$;
COMMENT ON FUNCTION rollup_messaged() IS 'report_rollup level: the tasks of a status with a message of its severity (category and what empty).';
CREATE FUNCTION rollup_category() RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 1::smallint $$;
COMMENT ON FUNCTION rollup_category() IS 'report_rollup level: per category (what empty).';
CREATE FUNCTION rollup_what() RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 2::smallint $$;
COMMENT ON FUNCTION rollup_what() IS 'report_rollup level: per category and what.';
CREATE FUNCTION rollup_status() RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 3::smallint $$;
COMMENT ON FUNCTION rollup_status() IS 'report_rollup level: every task of the status (kept for Fatal only).';

-- +goose Down
DROP FUNCTION rollup_status();
DROP FUNCTION rollup_what();
DROP FUNCTION rollup_category();
DROP FUNCTION rollup_messaged();
DROP FUNCTION status_severity(smallint);
