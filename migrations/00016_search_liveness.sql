-- The dashboard's search and liveness (docs/web.md#search, docs/web.md#liveness).
--
-- A trigram index answers entry ILIKE '%text%' at a million tasks without reading them all.
-- Entries never change after import, so the index costs the import only; a claim's status
-- update stays a heap-only update.
--
-- replica_heartbeats: each replica notes every few seconds that it is up, and that it stopped
-- when it stops cleanly; one that stopped noting is gone.

-- +goose Up
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX tasks_entry_trgm ON tasks USING gin (entry gin_trgm_ops);

CREATE TABLE replica_heartbeats (
    replica    text PRIMARY KEY,
    started_at timestamptz NOT NULL,
    seen_at    timestamptz NOT NULL,
    stopped    boolean NOT NULL DEFAULT false
);
COMMENT ON TABLE replica_heartbeats IS 'Each replica''s last sign of life (every few seconds) and whether it stopped cleanly.';

-- +goose Down
DROP TABLE replica_heartbeats;
DROP INDEX tasks_entry_trgm;
