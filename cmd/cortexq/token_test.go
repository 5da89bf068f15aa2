package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/audit"
)

// TestTokens: a token is printed once and stored as its SHA-256 digest only (no form of it is
// in a dump of the table), listed without its value, revoked by id or by owner; bad input is
// refused; creating and revoking append audit rows that do not hold the token.
func TestTokens(t *testing.T) {
	d := newTestDB(t)
	made := map[string]string{}
	for _, o := range []struct{ owner, role string }{{"ana", "admin"}, {"bo", "operator"}, {"bo", "viewer"}} {
		r := cortexq(t, d.env, "token", "create", "--owner", o.owner, "--role", o.role, "--expires", "720h")
		require.Equal(t, 0, r.code, r.stderr)
		token := strings.TrimSpace(r.stdout)
		require.Regexp(t, `^cqt_[A-Za-z0-9_-]{43}$`, token)
		require.Contains(t, r.stderr, "shown once")
		made[token] = o.owner
	}
	require.Len(t, made, 3)

	// The dump: every row as text, and the audit log's too.
	rows, err := d.pool.Query(d.ctx, `SELECT t::text FROM api_tokens t UNION ALL SELECT a::text FROM audit_log a`)
	require.NoError(t, err)
	dump, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	all := strings.Join(dump, "\n")
	for token := range made {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, audit.TokenPrefix))
		require.NoError(t, err)
		for _, form := range []string{token, strings.TrimPrefix(token, audit.TokenPrefix), hex.EncodeToString(raw)} {
			require.NotContains(t, all, form, "a form of the token in the dump")
		}
		sum := sha256.Sum256([]byte(token))
		require.Equal(t, 1, d.count(`SELECT count(*) FROM api_tokens WHERE digest = $1 AND owner = $2
			AND expires_at BETWEEN now() + interval '719 hours' AND now() + interval '721 hours'`, sum[:], made[token]))
	}

	var list []struct {
		ID        int64
		Owner     string
		Role      string
		RevokedAt *string `json:"revoked_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(d.ok("token", "list", "--json")), &list))
	require.Len(t, list, 3)
	require.Equal(t, "ana", list[0].Owner)
	require.Equal(t, "admin", list[0].Role)
	require.Contains(t, d.ok("token", "list"), "3 tokens")

	require.Equal(t, "2 tokens revoked\n", d.ok("token", "revoke", "--owner", "bo"))
	require.Equal(t, "0 tokens revoked\n", d.ok("token", "revoke", "--owner", "bo"))
	require.Equal(t, "1 tokens revoked\n", d.ok("token", "revoke", "--id", itoa(list[0].ID)))
	require.Equal(t, 3, d.count(`SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL`))

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "create", "--owner", "ana", "--role", "root"}, `--role "root": want viewer, operator or admin`},
		{[]string{"token", "create", "--owner", "a b", "--role", "viewer"}, `--owner "a b": want 1-64 letters`},
		{[]string{"token", "create", "--role", "viewer"}, `--owner "": want 1-64 letters`},
		{[]string{"token", "create", "--owner", "ana", "--role", "viewer", "--expires", "-1h"}, "--expires: want a positive duration"},
		{[]string{"token", "revoke"}, "give --id or --owner, one of them"},
		{[]string{"token", "revoke", "--id", "1", "--owner", "ana"}, "give --id or --owner, one of them"},
	} {
		oneLineFailure(t, cortexq(t, d.env, c.args...), c.want)
	}
	require.Equal(t, 3, d.count(`SELECT count(*) FROM api_tokens`), "refused input stores nothing")
	require.Equal(t, 3+3, d.count(`SELECT count(*) FROM audit_log WHERE action IN ('token create', 'token revoke') AND outcome <> 'refused'`))
	require.Equal(t, 6, d.count(`SELECT count(*) FROM audit_log WHERE action LIKE 'token %' AND outcome = 'refused'`))
}
