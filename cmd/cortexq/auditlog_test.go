package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// leafCommands returns the full names of the app's leaf commands ("sandbox create"), from its
// command tree: a command added to the tree is in this list without anyone listing it.
func leafCommands() []string {
	var out []string
	var walk func([]*cli.Command, string)
	walk = func(cmds []*cli.Command, prefix string) {
		for _, cmd := range cmds {
			if len(cmd.Subcommands) > 0 {
				walk(cmd.Subcommands, prefix+cmd.Name+" ")
				continue
			}
			out = append(out, prefix+cmd.Name)
		}
	}
	walk(newApp().Commands, "")
	sort.Strings(out)
	return out
}

// TestAuditCoversCommands: every leaf command of the tree either appends an audit row
// (auditedCommands) or says why it does not (notAudited), never both, and neither list names a
// command the tree lacks. A new command fails this test until it is put in one.
func TestAuditCoversCommands(t *testing.T) {
	leaves := leafCommands()
	require.NotEmpty(t, leaves)
	for _, name := range leaves {
		_, audited := auditedCommands[name]
		reason, exempt := notAudited[name]
		require.True(t, audited != exempt, "command %q: want it in exactly one of auditedCommands and notAudited", name)
		if exempt {
			require.NotEmpty(t, reason, "command %q: say why it appends no audit row", name)
		}
	}
	for name := range auditedCommands {
		require.Contains(t, leaves, name, "auditedCommands")
	}
	for name := range notAudited {
		require.Contains(t, leaves, name, "notAudited")
	}
}

// TestAuditRowOfEveryMutation runs every audited command with input it refuses and checks its
// audit row: the refused attempt is recorded, with the database role and the surface.
func TestAuditRowOfEveryMutation(t *testing.T) {
	d := newTestDB(t)
	var role string
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT current_user::text`).Scan(&role))
	for name := range auditedCommands {
		args := append(strings.Fields(name), "a-stray-argument", "and-another")
		if name == "verify" {
			args = append([]string{"verify", "--requeue"}, args[1:]...)
		}
		r := cortexq(t, d.env, args...)
		require.NotEqual(t, 0, r.code, "cortexq %v: want it refused", args)
		var outcome, dbRole, surface, actor, msg string
		err := d.pool.QueryRow(d.ctx, `SELECT outcome, db_role, surface, actor, error FROM audit_log
			WHERE action = $1 ORDER BY id DESC LIMIT 1`, name).Scan(&outcome, &dbRole, &surface, &actor, &msg)
		require.NoError(t, err, "cortexq %v: no audit row (stderr %s)", args, r.stderr)
		require.Contains(t, []string{"refused", "failed"}, outcome, name)
		require.Equal(t, role, dbRole, name)
		require.Equal(t, "cli", surface, name)
		require.NotEmpty(t, actor, name)
		require.NotEmpty(t, msg, name)
		require.Contains(t, r.stderr, msg, name)
	}
	// A reading command appends nothing; verify without --requeue only reads.
	before := d.count(`SELECT count(*) FROM audit_log`)
	d.ok("status")
	cortexq(t, d.env, "verify", "a-stray-argument")
	require.Equal(t, before, d.count(`SELECT count(*) FROM audit_log`))
}

// TestAuditRowsOfARerun: the preview and the rerun each append a row with the tasks matched.
func TestAuditRowsOfARerun(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 3)...)
	d.ok("rerun", "--corpus", "c", "--service", "echo", "--note", "again")
	d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo", "--note", "again")
	rows, err := d.pool.Query(d.ctx, `SELECT outcome, target, matched, parameters->>'note' FROM audit_log
		WHERE action = 'rerun' ORDER BY id`)
	require.NoError(t, err)
	type row struct {
		Outcome, Target string
		Matched         *int64
		Note            string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	three := int64(3)
	require.Equal(t, []row{
		{"dry_run", "corpus c, service echo", &three, "again"},
		{"ok", "corpus c, service echo", &three, "again"},
	}, got)

	// cortexq audit lists them, newest first, of an actor or database role.
	var role string
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT current_user::text`).Scan(&role))
	out := d.ok("audit", "--actor", role)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1+4, out) // service add, import, two reruns
	require.Regexp(t, `^TIME +ACTOR +ROLE +SURFACE +ACTION`, lines[0])
	require.Regexp(t, ` cli +rerun +corpus c, service echo +3 +ok +-$`, lines[1])
	require.Regexp(t, ` cli +rerun +corpus c, service echo +3 +dry_run +-$`, lines[2])
	require.Equal(t, "no audit rows\n", d.ok("audit", "--actor", "nobody"))
	jsonLines := strings.Split(strings.TrimSpace(d.ok("audit", "--json", "--since", "1h", "--limit", "1")), "\n")
	require.Len(t, jsonLines, 1)
	var last struct {
		Action, Outcome string
		Matched         int64
		Parameters      map[string]string
	}
	require.NoError(t, json.Unmarshal([]byte(jsonLines[0]), &last))
	require.Equal(t, "rerun", last.Action)
	require.Equal(t, "ok", last.Outcome)
	require.Equal(t, int64(3), last.Matched)
	require.Equal(t, "true", last.Parameters["yes"])
	r := cortexq(t, d.env, "audit", "--since", "0s")
	oneLineFailure(t, r, "--since: want a positive duration")
}

// TestAuditLogIsAppendOnly: no UPDATE, DELETE or TRUNCATE of the audit log succeeds, whether
// from the owner (a trigger refuses it), a replica role or an audit role (no privilege) — the
// roles `cortexq web` runs as too (a replica role, or an audit role with --read-only) — not
// even with the retention's setting (cortexq.audit_prune) on; the replica role may append, the
// audit role only read; the time and role are the server's.
func TestAuditLogIsAppendOnly(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	replica, auditor := testRole(t, d, "replica"), testRole(t, d, "auditor")
	d.ok("db", "grant-replica", replica, "--password", "r3plica")
	d.ok("db", "grant-audit", auditor, "--password", "aud1t")
	changes := []string{
		`UPDATE audit_log SET outcome = 'ok'`,
		`DELETE FROM audit_log`,
		`TRUNCATE audit_log`,
	}
	for _, q := range changes {
		_, err := d.pool.Exec(d.ctx, q)
		requireDenied(t, err, "owner: "+q)
	}
	insert := `INSERT INTO audit_log (at, db_role, actor, surface, action, outcome)
		VALUES ('2000-01-01', 'someone_else', 'me', 'api', 'test', 'ok')`
	for _, as := range []struct{ role, password string }{{replica, "r3plica"}, {auditor, "aud1t"}} {
		conn, err := pgx.Connect(d.ctx, asRole(t, d.dsn, as.role, as.password))
		require.NoError(t, err)
		defer conn.Close(d.ctx)
		for _, q := range changes {
			_, err := conn.Exec(d.ctx, q)
			requireDenied(t, err, as.role+": "+q)
		}
		_, err = conn.Exec(d.ctx, `SELECT set_config('cortexq.audit_prune', 'on', false)`)
		require.NoError(t, err)
		_, err = conn.Exec(d.ctx, `DELETE FROM audit_log`)
		requireDenied(t, err, as.role+": DELETE with the retention's setting on")
		var n int
		require.NoError(t, conn.QueryRow(d.ctx, `SELECT count(*) FROM audit_log`).Scan(&n), as.role)
		_, err = conn.Exec(d.ctx, insert)
		if as.role == auditor {
			requireDenied(t, err, as.role+": insert")
			continue
		}
		require.NoError(t, err, as.role+": insert")
	}
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_log WHERE action = 'test' AND db_role = $1
		AND at > now() - interval '1 hour'`, replica))
}

// TestRefusedWithoutADatabaseMakesNone: a mutating command refused where no embedded cluster is
// (the wrong directory) does not create one to record the refusal.
func TestRefusedWithoutADatabaseMakesNone(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	r := cortexq(t, []string{"CORTEXQ_HOME=" + home}, "rerun", "--corpus", "c")
	oneLineFailure(t, r, "--service")
	_, err := os.Stat(home)
	require.ErrorIs(t, err, os.ErrNotExist)
}
