package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
)

func TestKeys(t *testing.T) {
	d := newTestDB(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "alice.key")
	out := d.ok("keys", "gen", "--out", file)
	require.Contains(t, out, "public key: ")
	public := strings.TrimSpace(out[strings.Index(out, "public key: ")+len("public key: "):])
	info, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "a secret key file is private")
	pub, sec, err := readKeyFile(file)
	require.NoError(t, err)
	require.Equal(t, public, pub)
	require.Len(t, sec, 40)
	require.Equal(t, public+"\n", d.ok("keys", "public", file))
	r := cortexq(t, d.env, "keys", "gen", "--out", file)
	require.NotEqual(t, 0, r.code, "an existing key file is never overwritten")
	require.Contains(t, d.ok("keys", "gen"), "secret-key = ")

	// Allow by file and by key; names are checked.
	require.Contains(t, d.ok("keys", "allow", file, "--name", "alice"), "allowed key "+public+" as alice")
	bob := strings.TrimSpace(d.ok("keys", "public", writeKeyPair(t, d, dir, "bob.key")))
	d.ok("keys", "allow", bob, "--name", "bob")
	r = cortexq(t, d.env, "keys", "allow", bob, "--name", "../bob")
	require.Equal(t, 2, r.code, r.stderr)
	// The name is the principal: an allowed key takes another only with --rename.
	oneLineFailure(t, cortexq(t, d.env, "keys", "allow", bob, "--name", "robert"), "is allowed as bob: give --rename")
	require.Contains(t, d.ok("keys", "allow", bob, "--name", "bob"), "as bob;", "allowing it again under its name is fine")
	require.Contains(t, d.ok("keys", "allow", bob, "--name", "robert", "--rename"), "as robert (renamed from bob)")
	d.ok("keys", "allow", bob, "--name", "bob", "--rename")
	dashed := "-N%6X&)jX5Pe#5kY5yr(=2{-6j7$Vth9lDsY0v.+" // Z85 keys may begin with '-'
	require.Contains(t, d.ok("keys", "allow", dashed, "--name", "dash"), "allowed key "+dashed+" as dash")
	require.Contains(t, d.ok("keys", "revoke", dashed), dashed)
	r = cortexq(t, d.env, "keys", "allow", "not-a-key", "--name", "x")
	require.Equal(t, 2, r.code, r.stderr)
	r = cortexq(t, d.env, "keys", "allow", bob)
	require.Equal(t, 2, r.code, "--name is required: %s", r.stderr)
	list := d.ok("keys", "list")
	require.Contains(t, list, public)
	require.Contains(t, list, bob)

	require.Contains(t, d.ok("keys", "revoke", "--name", "alice"), "revoked key "+public)
	oneLineFailure(t, cortexq(t, d.env, "keys", "revoke", public), "no allowed key")
	require.Contains(t, d.ok("keys", "revoke", bob), "revoked key "+bob)
	require.Equal(t, 3, d.count(`SELECT count(*) FROM worker_keys WHERE revoked_at IS NOT NULL`), "alice, bob and the dashed key")
}

// writeKeyPair makes a key pair file in dir and returns its path.
func writeKeyPair(t *testing.T, d *testDB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	d.ok("keys", "gen", "--out", path)
	return path
}

// TestServeWithCurve runs a replica with CURVE and workers as subprocesses: an allowed worker
// converts the corpus, a worker without an allowed key gets nothing, and a revocation shuts the
// allowed one out without a restart.
func TestServeWithCurve(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	entries, err := bench.StageCorpus(d.ctx, t.TempDir(), 12, 2048)
	require.NoError(t, err)
	d.importList("c", "echo", entries...)
	dir := t.TempDir()
	replicaKey := writeKeyPair(t, d, dir, "replica.key")
	aliceKey := writeKeyPair(t, d, dir, "alice.key")
	malloryKey := writeKeyPair(t, d, dir, "mallory.key")
	d.ok("keys", "allow", aliceKey, "--name", "alice")

	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	replica := d.start("serve", "--replica", "r-curve", "--ventilator", vent, "--sink", sink, "--http", "",
		"--curve-secret-key-file", replicaKey, "--keys-refresh", "200ms")
	workerArgs := func(key, identity string, extra ...string) []string {
		return append([]string{"worker", "echo", "--service", "echo", "--ventilator", vent, "--sink", sink,
			"--server-key", replicaKey, "--key-file", key, "--identity", identity,
			"--throttle", "100ms", "--io-timeout", "1s"}, extra...)
	}
	// The public key alone is enough for --server-key too.
	mallory := d.start(workerArgs(malloryKey, "m", "--server-key", strings.TrimSpace(d.ok("keys", "public", replicaKey)))...)
	alice := d.start(workerArgs(aliceKey, "a")...)
	waitFor(t, 60*time.Second, "the allowed worker converts the corpus", func() bool {
		return d.count(`SELECT count(*) FROM tasks WHERE status = -1`) == len(entries)
	})
	require.Equal(t, 0, d.count(`SELECT count(*) FROM attempts WHERE worker <> 'key:alice/a'`),
		"every attempt went to the allowed key")
	require.Equal(t, 0, mallory.stop(syscall.SIGTERM, 10*time.Second))
	require.NotContains(t, replica.log(), "level=ERROR")

	// Revoked while connected: new tasks stay TODO.
	d.ok("keys", "revoke", aliceKey)
	time.Sleep(time.Second)
	more, err := bench.StageCorpus(d.ctx, t.TempDir(), 3, 100)
	require.NoError(t, err)
	d.importList("c2", "echo", more...)
	time.Sleep(2 * time.Second)
	require.Equal(t, 3, d.count(`SELECT count(*) FROM tasks WHERE status = 0`), "a revoked key gets nothing")
	require.Equal(t, 0, alice.stop(syscall.SIGTERM, 10*time.Second))
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second))
	require.Contains(t, replica.log(), "CURVE on")
}

func TestServeWarnsOfPlainSocketsBeyondLoopback(t *testing.T) {
	d := newTestDB(t)
	vent := fmt.Sprintf("tcp://0.0.0.0:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	replica := d.start("serve", "--replica", "r-plain", "--ventilator", vent, "--sink", sink, "--http", "")
	waitFor(t, 30*time.Second, "the replica serves", func() bool { return strings.Contains(replica.log(), "serving workers") })
	log := replica.log()
	require.Contains(t, log, "without CURVE")
	require.Equal(t, 1, strings.Count(log, "without CURVE"), "only the non-loopback socket is warned about:\n%s", log)
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second))
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testRole makes a role name unique to this test process, dropped with its privileges when the
// test ends.
func testRole(t *testing.T, d *testDB, prefix string) string {
	t.Helper()
	role := fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = d.pool.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{role}.Sanitize())
		_, _ = d.pool.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	})
	return role
}

// asRole returns dsn connecting as role with password.
func asRole(t *testing.T, dsn, role, password string) string {
	t.Helper()
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.User = url.UserPassword(role, password)
		return u.String()
	}
	return dsn + fmt.Sprintf(" user='%s' password='%s'", role, password) // a later keyword wins
}

// requireDenied requires err to be PostgreSQL's insufficient_privilege or read-only-transaction
// error.
func requireDenied(t *testing.T, err error, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%s: want a permission error, got %v", what, err)
	require.Contains(t, []string{"42501", "25006"}, pgErr.Code, "%s: %v", what, err)
}

func TestGrantAudit(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 2)...)
	role := testRole(t, d, "auditor")
	out := d.ok("db", "grant-audit", role, "--password", "s3cret")
	// Every table the schema lists as readable, whatever migrations added since.
	var readable int
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT count(*) FROM audit_readable`).Scan(&readable))
	require.GreaterOrEqual(t, readable, 27)
	require.Contains(t, out, fmt.Sprintf("role %s created (LOGIN): SELECT on %d tables and 8 audit views", role, readable))
	require.Contains(t, d.ok("db", "grant-audit", role), "updated", "running it again is fine")

	conn, err := pgx.Connect(d.ctx, asRole(t, d.dsn, role, "s3cret"))
	require.NoError(t, err)
	defer conn.Close(d.ctx)
	for _, q := range []string{
		"SELECT count(*) FROM audit_in_flight", "SELECT count(*) FROM audit_late_results",
		"SELECT count(*) FROM audit_dead_letters", "SELECT count(*) FROM audit_task_history",
		"SELECT count(*) FROM audit_worker_activity", "SELECT count(*) FROM audit_replica_load",
		"SELECT count(*) FROM audit_corpus_activity",
		"SELECT count(*) FROM tasks", "SELECT count(*) FROM dispatch", "SELECT count(*) FROM attempts",
		"SELECT count(*) FROM worker_keys", "SELECT task_status_name(status) FROM tasks",
		"SELECT count(*) FROM run_statuses",
	} {
		_, err := conn.Exec(d.ctx, q)
		require.NoError(t, err, q)
	}
	var n int
	require.NoError(t, conn.QueryRow(d.ctx, "SELECT count(*) FROM tasks").Scan(&n))
	require.Equal(t, 2, n)
	// Even with the read-only default turned off, no write is allowed.
	for _, readOnly := range []bool{true, false} {
		if !readOnly {
			_, err := conn.Exec(d.ctx, "SET default_transaction_read_only = off")
			require.NoError(t, err)
		}
		for _, q := range []string{
			"INSERT INTO services (name) VALUES ('evil')",
			"UPDATE tasks SET status = -1",
			"DELETE FROM attempts",
			"TRUNCATE dispatch",
			"INSERT INTO worker_keys (public_key, name) VALUES (repeat('x', 40), 'evil')",
			"UPDATE worker_keys SET revoked_at = NULL",
			"CREATE TABLE evil (x int)",
			"SELECT count(*) FROM river_job",
			"SELECT count(*) FROM goose_db_version",
		} {
			_, err := conn.Exec(d.ctx, q)
			requireDenied(t, err, q)
		}
	}
	require.Equal(t, 0, d.count(`SELECT count(*) FROM services WHERE name = 'evil'`))

	// A superuser is not made an audit role.
	r := cortexq(t, d.env, "db", "grant-audit", "postgres")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "not an audit role")
}

// TestReplicaNeedsNoSuperuser runs a replica and a worker as a role that is no superuser and owns
// nothing: it has only SELECT, INSERT, UPDATE and DELETE on the schema's tables and the use of
// its sequences.
func TestReplicaNeedsNoSuperuser(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	entries, err := bench.StageCorpus(d.ctx, t.TempDir(), 6, 1024)
	require.NoError(t, err)
	d.importList("c", "echo", entries...)
	role := testRole(t, d, "replica")
	out := d.ok("db", "grant-replica", role, "--password", "r3plica")
	require.Contains(t, out, "role "+role+" created (LOGIN): read and write on ")
	require.Contains(t, out, "owns nothing; settings enable_seqscan=off, idle_in_transaction_session_timeout=60s, jit=off")
	// Again, as after a migration: the same grants, the role updated.
	require.Contains(t, d.ok("db", "grant-replica", role), "role "+role+" updated (LOGIN)")
	env := []string{"DATABASE_URL=" + asRole(t, d.dsn, role, "r3plica")}
	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	as := &testDB{t: t, ctx: d.ctx, env: env}
	replica := as.start("serve", "--replica", "r-plain-role", "--ventilator", vent, "--sink", sink, "--http", "", "--reap-interval", "1s")
	as.start("worker", "echo", "--service", "echo", "--ventilator", vent, "--sink", sink, "--throttle", "100ms")
	waitFor(t, 60*time.Second, "the corpus is converted", func() bool {
		return d.count(`SELECT count(*) FROM tasks WHERE status = -1`) == len(entries)
	})
	time.Sleep(2 * time.Second) // a reaper pass or two
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second))
	require.NotContains(t, replica.log(), "permission denied")
	// It owns nothing and may change no schema: migrations are the owner's.
	require.Equal(t, 0, d.count(`SELECT count(*) FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles WHERE rolname = $1)`, role))
	conn, err := pgx.Connect(d.ctx, asRole(t, d.dsn, role, "r3plica"))
	require.NoError(t, err)
	defer conn.Close(d.ctx)
	var seqscan string
	require.NoError(t, conn.QueryRow(d.ctx, "SHOW enable_seqscan").Scan(&seqscan))
	require.Equal(t, "off", seqscan, "the role's own setting")
	_, err = conn.Exec(d.ctx, "CREATE TABLE replica_made (x int)")
	requireDenied(t, err, "create a table")
	_, err = conn.Exec(d.ctx, "ALTER TABLE tasks ADD COLUMN x int")
	require.ErrorContains(t, err, "must be owner")
	_, err = conn.Exec(d.ctx, "TRUNCATE attempts")
	requireDenied(t, err, "truncate")
	_, err = conn.Exec(d.ctx, "DELETE FROM goose_db_version")
	requireDenied(t, err, "rewrite the migrations' record")
	// A role that owns a table is not a replica role; nor is a superuser.
	owner := testRole(t, d, "owner")
	for _, stmt := range []string{"CREATE ROLE " + owner, "CREATE TABLE owned_" + owner + " (x int)", "ALTER TABLE owned_" + owner + " OWNER TO " + owner} {
		_, err := d.pool.Exec(d.ctx, stmt)
		require.NoError(t, err, stmt)
	}
	r := cortexq(t, d.env, "db", "grant-replica", owner)
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "owns 1 tables, views or sequences of this database: a replica role owns nothing")
	r = cortexq(t, d.env, "db", "grant-replica", "postgres")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "not a replica role")
}
