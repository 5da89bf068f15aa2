-- name: TokenInsert :one
-- TokenInsert stores a new token's digest (cortexq token create); the token itself is never stored.
INSERT INTO api_tokens (owner, role, digest, expires_at)
VALUES (@owner, @role, @digest, sqlc.narg('expires_at')::timestamptz)
RETURNING id, created_at;

-- name: TokenList :many
-- TokenList lists the tokens, without their digests.
SELECT id, owner, role, created_at, expires_at, revoked_at
FROM api_tokens
ORDER BY id;

-- name: TokenRevoke :execrows
-- TokenRevoke revokes the token of an id, or every token of an owner, not yet revoked.
UPDATE api_tokens
SET revoked_at = now()
WHERE revoked_at IS NULL
  AND (id = sqlc.narg('id')::bigint OR owner = sqlc.narg('owner')::text);
