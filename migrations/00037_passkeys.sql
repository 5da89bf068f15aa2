-- Passkeys (WebAuthn credentials) people sign in to the dashboard with (docs/security.md#passkeys).
-- passkey_owners gives each owner a random user handle, the id an authenticator stores with a
-- discoverable credential and hands back at sign-in; passkeys holds each owner's credentials. The
-- public key is not a secret: a row lets nobody sign in. record keeps the library's whole credential
-- record (flags, attestation) as JSON; the other columns are what people and queries look at.

-- +goose Up
CREATE TABLE passkey_owners (
    owner  text PRIMARY KEY,
    handle bytea NOT NULL UNIQUE CHECK (length(handle) = 32)
);
COMMENT ON TABLE passkey_owners IS 'The WebAuthn user handle of each owner with a passkey (docs/security.md#passkeys).';

CREATE TABLE passkeys (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner         text NOT NULL REFERENCES passkey_owners (owner),
    credential_id bytea NOT NULL UNIQUE CHECK (length(credential_id) BETWEEN 1 AND 1023),
    public_key    bytea NOT NULL,
    sign_count    bigint NOT NULL DEFAULT 0,
    transports    text[] NOT NULL DEFAULT '{}',
    aaguid        bytea,
    name          text NOT NULL,
    record        jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz
);
CREATE INDEX passkeys_owner ON passkeys (owner);
COMMENT ON TABLE passkeys IS 'Passkeys (WebAuthn credentials) by owner: enrolled on /passkeys, used on /login (docs/security.md#passkeys).';
COMMENT ON COLUMN passkeys.sign_count IS 'The authenticator''s signature counter at its last use (0 for authenticators that keep none).';
COMMENT ON COLUMN passkeys.record IS 'The go-webauthn credential record (flags, attestation) as JSON.';

-- +goose Down
DROP TABLE passkeys;
DROP TABLE passkey_owners;
