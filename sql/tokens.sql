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

-- name: TokenByDigest :one
-- TokenByDigest finds the token of a digest, with whether it still works by the database's clock.
SELECT id, owner, role, expires_at, revoked_at,
       (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()))::bool AS usable
FROM api_tokens
WHERE digest = @digest;

-- name: SessionStart :one
-- SessionStart stores a new session (its id's digest only), expiring after ttl_seconds by the database's clock.
INSERT INTO web_sessions (digest, owner, role, token_id, expires_at, remote, user_agent)
VALUES (@digest, @owner, @role, sqlc.narg('token_id')::bigint, now() + interval '1 second' * @ttl_seconds::bigint, @remote, @user_agent)
RETURNING id;

-- name: SessionTouch :one
-- SessionTouch finds the live session of a digest (not ended, not expired, its token neither
-- revoked nor expired) and stamps last_seen at most once a minute.
WITH s AS (
    SELECT w.id, w.owner, w.role, w.token_id
    FROM web_sessions w
    LEFT JOIN api_tokens t ON t.id = w.token_id
    WHERE w.digest = @digest AND w.ended_at IS NULL AND w.expires_at > now()
      AND (w.token_id IS NULL OR (t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())))
), touched AS (
    UPDATE web_sessions SET last_seen = now()
    WHERE id IN (SELECT id FROM s) AND last_seen < now() - interval '1 minute'
)
SELECT id, owner, role, token_id FROM s;

-- name: SessionEnd :execrows
-- SessionEnd ends the session of a digest (signed out).
UPDATE web_sessions SET ended_at = now(), ended_why = @why
WHERE digest = @digest AND ended_at IS NULL;

-- name: SessionRevoke :execrows
-- SessionRevoke ends the live sessions of an id, of an owner, or of a token.
UPDATE web_sessions SET ended_at = now(), ended_why = @why
WHERE ended_at IS NULL
  AND (id = sqlc.narg('id')::bigint OR owner = sqlc.narg('owner')::text OR token_id = sqlc.narg('token_id')::bigint);

-- name: SessionEndRevokedTokens :execrows
-- SessionEndRevokedTokens ends the live sessions whose token is revoked (after TokenRevoke).
UPDATE web_sessions w SET ended_at = now(), ended_why = 'token revoked'
FROM api_tokens t
WHERE w.token_id = t.id AND w.ended_at IS NULL AND t.revoked_at IS NOT NULL;

-- name: SessionList :many
-- SessionList lists the sessions, of an owner or all, live ones only unless @ended, newest first.
SELECT id, owner, role, token_id, started_at, last_seen, expires_at, remote, user_agent, ended_at, ended_why
FROM web_sessions
WHERE (sqlc.narg('owner')::text IS NULL OR owner = sqlc.narg('owner')::text)
  AND (@ended::bool OR (ended_at IS NULL AND expires_at > now()))
ORDER BY started_at DESC, id DESC
LIMIT @max_rows;

-- name: SessionOwner :one
-- SessionOwner is the owner of a session id.
SELECT owner FROM web_sessions WHERE id = @id;
