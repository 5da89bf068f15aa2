package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSessionsAndAuditRetention: sessions are listed and revoked by id or owner; revoking an
// owner's tokens ends every session of the owner (a passkey's too, which has no token); prune
// --tables --audit-age drops old audit rows and old ended sessions, and nothing else ever
// deletes an audit row.
func TestSessionsAndAuditRetention(t *testing.T) {
	d := newTestDB(t)
	tok := strings.TrimSpace(d.ok("token", "create", "--owner", "ana", "--role", "operator"))
	require.NotEmpty(t, tok)
	var tokenID int64
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT id FROM api_tokens WHERE owner = 'ana'`).Scan(&tokenID))
	// Sessions as the dashboard starts them: ana by token and by passkey (no token), bob.
	_, err := d.pool.Exec(d.ctx, `INSERT INTO web_sessions (digest, owner, role, token_id, expires_at, remote, user_agent) VALUES
		(sha256('a1'), 'ana', 'operator', $1, now() + interval '1 hour', '10.0.0.1', 'Firefox'),
		(sha256('a2'), 'ana', 'operator', NULL, now() + interval '1 hour', '10.0.0.2', 'Chromium'),
		(sha256('b1'), 'bob', 'viewer', NULL, now() + interval '1 hour', '10.0.0.3', 'curl')`, tokenID)
	require.NoError(t, err)
	out := d.ok("session", "list")
	require.Contains(t, out, "3 sessions")
	require.Contains(t, out, "10.0.0.2")
	require.Contains(t, d.ok("session", "list", "--owner", "ana"), "2 sessions")

	require.Equal(t, "1 tokens revoked\n2 sessions ended\n", d.ok("token", "revoke", "--owner", "ana"))
	require.Contains(t, d.ok("session", "list"), "1 sessions")
	require.Contains(t, d.ok("session", "list", "--ended"), "owner's tokens revoked")
	var bob int64
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT id FROM web_sessions WHERE owner = 'bob'`).Scan(&bob))
	require.Equal(t, "1 sessions ended\n", d.ok("session", "revoke", "--id", strconv.FormatInt(bob, 10)))
	require.Equal(t, "0 sessions ended\n", d.ok("session", "revoke", "--owner", "bob"))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_log WHERE action = 'session revoke' AND outcome = 'ok' AND target = 'owner bob'`))

	// Retention: one row made old (by the owner, triggers off, as a test may); prune drops it.
	rows := d.count(`SELECT count(*) FROM audit_log`)
	_, err = d.pool.Exec(d.ctx, `BEGIN; ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only;
		UPDATE audit_log SET at = at - interval '40 days' WHERE id = (SELECT min(id) FROM audit_log);
		UPDATE web_sessions SET ended_at = ended_at - interval '40 days' WHERE owner = 'bob';
		ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only; COMMIT`)
	require.NoError(t, err)
	_, err = d.pool.Exec(d.ctx, `DELETE FROM audit_log`)
	require.ErrorContains(t, err, "append-only", "a plain DELETE is still refused")
	require.Contains(t, d.ok("prune", "--tables", "--audit-age", "720h"), "the audit rows and ended sessions older than 720h0m0s")
	require.Equal(t, rows+1, d.count(`SELECT count(*) FROM audit_log`), "a dry run drops nothing (and appends its row)")
	r := cortexq(t, d.env, "prune", "--tables", "--yes", "--audit-age", "720h")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "dropped 1 audit rows and 1 ended sessions")
	require.Equal(t, rows+1, d.count(`SELECT count(*) FROM audit_log`), "one dropped, the prune's own row added")
	require.Equal(t, 2, d.count(`SELECT count(*) FROM web_sessions`))
}
