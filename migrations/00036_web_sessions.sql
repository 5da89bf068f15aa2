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

-- +goose Down
DROP TABLE web_sessions;
