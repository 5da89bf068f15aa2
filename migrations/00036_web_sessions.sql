-- Server-side sessions of the dashboard and the API (docs/security.md#sessions): a browser's
-- cookie holds a random id; the table keeps only its SHA-256 digest, so a dump holds no usable
-- session. A session is an owner's, with the role it signed in with and the token it signed in
-- with (NULL: the break-glass admin token, or a passkey). It ends when signed out, revoked
-- (cortexq session revoke, the API, the dashboard), when its token is revoked, or at expires_at.

-- +goose Up
CREATE TABLE web_sessions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    digest     bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
    owner      text NOT NULL,
    role       text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    token_id   bigint REFERENCES api_tokens (id),
    started_at timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    remote     text NOT NULL DEFAULT '',
    user_agent text NOT NULL DEFAULT '',
    ended_at   timestamptz,
    ended_why  text NOT NULL DEFAULT ''
);
CREATE INDEX web_sessions_owner ON web_sessions (owner) WHERE ended_at IS NULL;
CREATE INDEX web_sessions_token ON web_sessions (token_id) WHERE ended_at IS NULL;
COMMENT ON TABLE web_sessions IS 'Dashboard and API sessions; digest is SHA-256 of the cookie''s random id, never the id (docs/security.md#sessions).';
COMMENT ON COLUMN web_sessions.remote IS 'The client address the session started from (the peer, not a header).';

-- The audit log's retention (cortexq prune --tables --audit-age): its append-only trigger lets a
-- DELETE through in a transaction that sets cortexq.audit_prune (set_config(..., true)); UPDATE
-- and TRUNCATE stay refused. Privileges still decide who may DELETE at all: the replica and
-- audit roles may not (cortexq db grant-replica, grant-audit), only the table's owner.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_log_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('cortexq.audit_prune', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege', HINT = 'see docs/audit-log.md';
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_log_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege', HINT = 'see docs/audit-log.md';
END
$$;
-- +goose StatementEnd
DROP TABLE web_sessions;
