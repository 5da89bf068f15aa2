-- The audit log (docs/audit-log.md): one row per mutating action from the CLI (and, later, the
-- dashboard and the API), refused and failed attempts included. Append-only twice over: by
-- privileges (PUBLIC has nothing; cortexq db grant-replica grants INSERT and SELECT only, grant-audit
-- SELECT only) and by triggers that raise on UPDATE, DELETE and TRUNCATE, so even the owner's
-- accidental statement fails. The time and the database role are the server's, set by a trigger:
-- a client can name neither.

-- +goose Up
CREATE TABLE audit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL,
    db_role    text NOT NULL,
    actor      text NOT NULL,
    surface    text NOT NULL CHECK (surface IN ('cli', 'web', 'api')),
    action     text NOT NULL,
    target     text NOT NULL DEFAULT '',
    parameters jsonb NOT NULL DEFAULT '{}',
    matched    bigint,
    outcome    text NOT NULL CHECK (outcome IN ('ok', 'dry_run', 'refused', 'failed')),
    error      text NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_at ON audit_log (at);
COMMENT ON TABLE audit_log IS 'Append-only record of every mutating action (docs/audit-log.md).';
COMMENT ON COLUMN audit_log.at IS 'The database clock when the row was written (set by the insert trigger).';
COMMENT ON COLUMN audit_log.db_role IS 'current_user of the session that wrote the row (set by the insert trigger).';
COMMENT ON COLUMN audit_log.actor IS 'Who acted: the owner of a token, or for the CLI the operating-system user.';
COMMENT ON COLUMN audit_log.matched IS 'Blast radius: the tasks the action matched (NULL: not a task action).';
COMMENT ON COLUMN audit_log.outcome IS 'ok; dry_run (previewed, nothing changed); refused (bad input); failed (an error).';

-- +goose StatementBegin
CREATE FUNCTION audit_log_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.at := clock_timestamp();
    NEW.db_role := current_user;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION audit_log_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege', HINT = 'see docs/audit-log.md';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_log_stamp BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_stamp();
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_refuse();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse();
REVOKE ALL ON audit_log FROM PUBLIC;
INSERT INTO audit_readable (name) VALUES ('audit_log');

-- The tokens people sign in with (cortexq token create): each an owner's, with a role, stored as
-- the SHA-256 digest of the token, never the token itself; revoked by stamping revoked_at (the
-- row stays, for the audit log's sake).
CREATE TABLE api_tokens (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner      text NOT NULL,
    role       text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    digest     bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz
);
CREATE INDEX api_tokens_owner ON api_tokens (owner);
COMMENT ON TABLE api_tokens IS 'Sign-in tokens by owner and role; digest is SHA-256 of the token, never the token (cortexq token).';

-- +goose Down
DROP TABLE api_tokens;
DELETE FROM audit_readable WHERE name = 'audit_log';
DROP TABLE audit_log;
DROP FUNCTION audit_log_refuse();
DROP FUNCTION audit_log_stamp();
