-- name: PasskeyOwnerHandle :one
-- PasskeyOwnerHandle returns an owner's WebAuthn user handle, storing the one given if the owner
-- has none yet.
WITH made AS (
    INSERT INTO passkey_owners (owner, handle) VALUES (@owner, @handle)
    ON CONFLICT (owner) DO NOTHING
    RETURNING handle
)
SELECT handle FROM made
UNION ALL
SELECT handle FROM passkey_owners WHERE owner = @owner
LIMIT 1;

-- name: PasskeyOwnerByHandle :one
-- PasskeyOwnerByHandle names the owner of a user handle.
SELECT owner FROM passkey_owners WHERE handle = @handle;

-- name: PasskeyInsert :one
-- PasskeyInsert stores a credential enrolled by its owner.
INSERT INTO passkeys (owner, credential_id, public_key, sign_count, transports, aaguid, name, record)
VALUES (@owner, @credential_id, @public_key, @sign_count, @transports::text[], @aaguid, @name, @record::jsonb)
RETURNING id;

-- name: PasskeysOfOwner :many
-- PasskeysOfOwner lists an owner's passkeys, their records included (for a ceremony).
SELECT id, owner, credential_id, sign_count, transports, name, record, created_at, last_used_at
FROM passkeys
WHERE owner = @owner
ORDER BY id;

-- name: PasskeyList :many
-- PasskeyList lists the passkeys of one owner, or of every owner when owner is NULL.
SELECT id, owner, transports, aaguid, name, sign_count, created_at, last_used_at
FROM passkeys
WHERE sqlc.narg('owner')::text IS NULL OR owner = sqlc.narg('owner')::text
ORDER BY owner, id;

-- name: PasskeyUsed :execrows
-- PasskeyUsed records a sign-in with a passkey: its new counter and record, and when.
UPDATE passkeys
SET sign_count = @sign_count, record = @record::jsonb, last_used_at = now()
WHERE credential_id = @credential_id AND owner = @owner;

-- name: PasskeyDelete :one
-- PasskeyDelete deletes a passkey by id, only of the owner given unless owner is NULL (an admin);
-- it returns the deleted passkey's owner and name.
DELETE FROM passkeys
WHERE id = @id AND (sqlc.narg('owner')::text IS NULL OR owner = sqlc.narg('owner')::text)
RETURNING owner, name;

-- name: OwnerBestToken :one
-- OwnerBestToken is the live token (not revoked, not expired) of an owner with the highest role,
-- the newest of those: a passkey signs its owner in through it, and not at all without one.
SELECT id, role FROM api_tokens
WHERE owner = @owner AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
ORDER BY CASE role WHEN 'admin' THEN 3 WHEN 'operator' THEN 2 ELSE 1 END DESC, id DESC
LIMIT 1;
