-- Where an attempt's time went (docs/stages.md): attempts.stages packs its stage times, from the
-- wait in TODO to its claim's commit and the worker's own unpack, convert and pack, as unsigned
-- LEB128 varints of the time plus one (0: not recorded; whole seconds for the wait in TODO,
-- milliseconds for the rest), in the order of queue.Stage, the trailing unrecorded ones left out:
-- 10 to 16 bytes for a typical attempt (queue.Stages.Encode).
--
-- Nullable, no default: the ADD COLUMN rewrites nothing and is metadata only, and a replica of
-- the release before writes no stages (its attempts read NULL, "not recorded").

-- +goose Up
ALTER TABLE attempts ADD COLUMN IF NOT EXISTS stages bytea;
COMMENT ON COLUMN attempts.stages IS
    'Stage times of the attempt, packed (queue.Stages.Encode, docs/stages.md); NULL: not recorded.';

-- +goose Down
ALTER TABLE attempts DROP COLUMN IF EXISTS stages;
