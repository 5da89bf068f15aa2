package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestGrantAuditRoleIsReadOnlyByPrivileges turns the audit role's read-only default off and
// tries what a read-only session cannot do, but privileges must stop.
func TestGrantAuditRoleIsReadOnlyByPrivileges(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 2)...)
	sc := d.scope("c", "echo")
	role := testRole(t, d, "auditor")
	d.ok("db", "grant-audit", role, "--password", "s3cret")

	conn, err := pgx.Connect(d.ctx, asRole(t, d.dsn, role, "s3cret"))
	require.NoError(t, err)
	defer conn.Close(d.ctx)
	for _, q := range []string{
		"SET default_transaction_read_only = off",
		"SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
	} {
		_, err := conn.Exec(d.ctx, q)
		require.NoError(t, err, q)
	}
	for _, q := range []string{
		"SELECT lo_create(0)",
		"SELECT lo_creat(-1)",
		"SELECT lo_from_bytea(0, 'a large object outlives the session')",
		"CREATE TEMP TABLE evil (x int)",
	} {
		_, err := conn.Exec(d.ctx, q)
		requireDenied(t, err, q)
	}
	require.Equal(t, 0, d.count(`SELECT count(*) FROM pg_largeobject_metadata`))

	// An advisory lock is anyone's to take, but imports no longer wait for one: with a lock
	// timeout, a wait would be an error rather than a hang.
	_, err = conn.Exec(d.ctx, "SELECT pg_advisory_lock($1, $2)", sc.CorpusID, sc.ServiceID)
	require.NoError(t, err)
	list := filepath.Join(t.TempDir(), "list")
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(entries("t", 3), "\n")), 0o644))
	r := cortexq(t, append(d.env, "PGOPTIONS=-c lock_timeout=5s"), "import", "--corpus", "c", "--service", "echo", "--from-list", list)
	require.Equal(t, 0, r.code, "import while an audit session holds an advisory lock: %s", r.stderr)
	require.Contains(t, r.stdout, "1 tasks added, 2 already present")
	// And the audit role cannot take the import's own lock: it needs UPDATE on corpora.
	_, err = conn.Exec(d.ctx, "SELECT 1 FROM corpora WHERE id = $1 FOR NO KEY UPDATE", sc.CorpusID)
	requireDenied(t, err, "row lock on corpora")
}

// TestGrantAuditSendsThePasswordHashed logs the database's DDL and checks that the password is
// not in the server's log, and that the role logs in with it where passwords are checked.
func TestGrantAuditSendsThePasswordHashed(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	var db, dataDir string
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT current_database(), current_setting('data_directory')`).Scan(&db, &dataDir))
	_, err := d.pool.Exec(d.ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" SET log_statement = 'ddl'")
	require.NoError(t, err)
	role := testRole(t, d, "auditor")
	password := fmt.Sprintf("pw-%d", time.Now().UnixNano())
	d.ok("db", "grant-audit", role, "--password", password)

	logFile := filepath.Join(filepath.Dir(dataDir), "postgres.log")
	var log []byte
	require.Eventually(t, func() bool {
		log, err = os.ReadFile(logFile)
		return err == nil && strings.Contains(string(log), "ALTER ROLE "+role+" PASSWORD")
	}, 10*time.Second, 50*time.Millisecond, "the statement is logged")
	require.False(t, strings.Contains(string(log), password), "the password is in the server's log")
	require.Contains(t, string(log), "ALTER ROLE "+role+" PASSWORD 'SCRAM-SHA-256$4096:")

	checkPasswords(t, d, role)
	conn, err := pgx.Connect(d.ctx, asRole(t, d.dsn, role, password))
	require.NoError(t, err, "the role logs in with its password")
	conn.Close(d.ctx)
}

// checkPasswords makes the test cluster check role's password (it trusts everyone else) until
// the end of the test, and waits until a wrong password is refused.
func checkPasswords(t *testing.T, d *testDB, role string) {
	t.Helper()
	var hba string
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT current_setting('hba_file')`).Scan(&hba))
	orig, err := os.ReadFile(hba)
	require.NoError(t, err)
	rules := fmt.Sprintf("local all %s scram-sha-256\nhost all %s all scram-sha-256\n", role, role)
	require.NoError(t, os.WriteFile(hba, append([]byte(rules), orig...), 0))
	t.Cleanup(func() {
		require.NoError(t, os.WriteFile(hba, orig, 0))
		_, err := d.pool.Exec(d.ctx, "SELECT pg_reload_conf()")
		require.NoError(t, err)
	})
	_, err = d.pool.Exec(d.ctx, "SELECT pg_reload_conf()")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		conn, err := pgx.Connect(d.ctx, asRole(t, d.dsn, role, "wrong"))
		if err == nil {
			conn.Close(d.ctx)
		}
		return err != nil
	}, 10*time.Second, 50*time.Millisecond, "a wrong password is refused once the rules are loaded")
}

// TestGrantAuditReadsWhatTheSchemaDeclares: a view a migration lists in audit_readable is the
// audit role's to read, with no change to grant-audit; one not listed is not.
func TestGrantAuditReadsWhatTheSchemaDeclares(t *testing.T) {
	d := newTestDB(t)
	for _, q := range []string{
		`CREATE VIEW tally_listed AS SELECT count(*) AS n FROM tasks`,
		`CREATE VIEW tally_unlisted AS SELECT count(*) AS n FROM tasks`,
		`INSERT INTO audit_readable (name) VALUES ('tally_listed')`,
	} {
		_, err := d.pool.Exec(d.ctx, q)
		require.NoError(t, err, q)
	}
	role := testRole(t, d, "auditor")
	d.ok("db", "grant-audit", role, "--password", "s3cret")

	conn, err := pgx.Connect(d.ctx, asRole(t, d.dsn, role, "s3cret"))
	require.NoError(t, err)
	defer conn.Close(d.ctx)
	var n int64
	require.NoError(t, conn.QueryRow(d.ctx, `SELECT n FROM tally_listed`).Scan(&n))
	require.NoError(t, conn.QueryRow(d.ctx, `SELECT count(*) FROM audit_in_flight`).Scan(&n))
	require.NoError(t, conn.QueryRow(d.ctx, `SELECT count(*) FROM tasks`).Scan(&n))
	_, err = conn.Exec(d.ctx, `SELECT n FROM tally_unlisted`)
	requireDenied(t, err, "a view not in audit_readable")
}
