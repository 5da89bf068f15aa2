-- The CURVE allow-list: the public keys of the workers a replica running with CURVE lets in.
-- Every replica polls this table, so one `cortexq keys allow` or `revoke` reaches them all.

-- +goose Up
CREATE TABLE worker_keys (
    -- The worker's CURVE public key, Z85-encoded (40 characters).
    public_key text PRIMARY KEY CHECK (length(public_key) = 40),
    -- The principal the key authenticates: a worker named w connecting with this key is
    -- recorded as key:<name>/w. Several keys may share a name (a rotation in progress).
    name       text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    added_at   timestamptz NOT NULL DEFAULT now(),
    -- Set by `cortexq keys revoke`: the key is refused from then on.
    revoked_at timestamptz
);
CREATE INDEX worker_keys_name ON worker_keys (name);
COMMENT ON TABLE worker_keys IS 'CURVE public keys of the workers allowed in (revoked_at IS NULL), polled by every replica.';

-- +goose Down
DROP TABLE worker_keys;
