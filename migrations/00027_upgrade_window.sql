-- The upgrade window: which binaries may still run against this database (docs/operations.md,
-- "Upgrades"). A binary expects the schema of its newest migration (`cortexq version` prints it).
-- Every migration only adds, so a binary that expects an older schema keeps working, down to
-- oldest_schema: a migration that contracts (drops or changes what older binaries use) ships one
-- release after the expansion it cleans up, and raises oldest_schema and oldest_release to the
-- release that stopped using it. A binary expecting a schema older than oldest_schema refuses to
-- start and names the release to install. Binaries from before this table (v0.1.0) do not read it.

-- +goose Up
CREATE TABLE upgrade_window (
    only_row       boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    oldest_schema  bigint NOT NULL,
    oldest_release text NOT NULL
);
COMMENT ON TABLE upgrade_window IS
    'One row: binaries expecting a schema older than oldest_schema (their newest migration) must not run against this database; oldest_release is the first release that may.';
-- v0.1.0 (schema 25) replicas run correctly against this schema.
INSERT INTO upgrade_window (oldest_schema, oldest_release) VALUES (25, 'v0.1.0');

-- +goose Down
DROP TABLE upgrade_window;
