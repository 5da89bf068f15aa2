-- name: AuditLogAppend :exec
-- AuditLogAppend appends a row to the audit log; its time and database role are the server's
-- (migrations/00035_audit_log.sql).
INSERT INTO audit_log (at, db_role, actor, surface, action, target, parameters, matched, outcome, error)
VALUES (clock_timestamp(), current_user, @actor, @surface, @action, @target, @parameters::jsonb,
        sqlc.narg('matched')::bigint, @outcome, @error);

-- name: AuditLogList :many
-- AuditLogList lists the audit log since a time, newest first, optionally of one actor (its
-- owner, operating-system user or database role).
SELECT id, at, db_role, actor, surface, action, target, parameters, matched, outcome, error
FROM audit_log
WHERE at >= @since::timestamptz
  AND (sqlc.narg('actor')::text IS NULL OR actor = sqlc.narg('actor')::text OR db_role = sqlc.narg('actor')::text)
ORDER BY at DESC, id DESC
LIMIT @max_rows;

-- name: AuditLogPrune :execrows
-- AuditLogPrune deletes the audit rows older than an age (cortexq prune --tables --audit-age); the
-- append-only trigger lets it through only in a transaction that set cortexq.audit_prune
-- (migrations/00036_web_sessions.sql), and only a role with DELETE on the table (its owner).
DELETE FROM audit_log WHERE at < now() - interval '1 second' * @age_seconds::bigint;

-- name: SessionPrune :execrows
-- SessionPrune deletes the sessions ended or expired longer ago than an age.
DELETE FROM web_sessions WHERE coalesce(ended_at, expires_at) < now() - interval '1 second' * @age_seconds::bigint;
