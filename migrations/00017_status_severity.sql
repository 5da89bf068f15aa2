-- The severity of the messages the report counts for a task of a final status: one definition
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

-- +goose Down
DROP FUNCTION status_severity(smallint);
