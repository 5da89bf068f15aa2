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
