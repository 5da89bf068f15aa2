-- What `cortexq verify` compares the files with (docs/operations.md, "Backup and restore"):
--   attempts.result_size, result_digest   the result archive an accepted attempt published: its
--                                         size in bytes and SHA-256, computed while the sink
--                                         wrote it; size -1 for a result kept without an archive
--                                         (too large: the earlier one is removed);
--   tasks.source_size, source_mtime       the source archive's size and modification time when
--                                         it was imported.
-- All nullable, no default: adding them rewrites nothing, and the replicas of the release before
-- (which write none of them) keep working; their rows read NULL, "not recorded", which verify
-- checks for presence only.

-- +goose Up
ALTER TABLE attempts ADD COLUMN result_size bigint, ADD COLUMN result_digest bytea;
COMMENT ON COLUMN attempts.result_size IS
    'Size in bytes of the result archive this attempt published when accepted (-1: none kept; NULL: not recorded).';
COMMENT ON COLUMN attempts.result_digest IS
    'SHA-256 of the result archive this attempt published when accepted (NULL: not recorded).';
ALTER TABLE tasks ADD COLUMN source_size bigint, ADD COLUMN source_mtime timestamptz;
COMMENT ON COLUMN tasks.source_size IS 'Size in bytes of the source archive when imported (NULL: not recorded).';
COMMENT ON COLUMN tasks.source_mtime IS 'Modification time of the source archive when imported (NULL: not recorded).';

-- +goose Down
ALTER TABLE tasks DROP COLUMN source_mtime, DROP COLUMN source_size;
ALTER TABLE attempts DROP COLUMN result_digest, DROP COLUMN result_size;
