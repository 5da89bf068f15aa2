package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestEmbeddedDatabase runs the commands without a database URL: they use the embedded cluster
// in $CORTEXQ_HOME, created, migrated and started on first use.
func TestEmbeddedDatabase(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	env := []string{"CORTEXQ_HOME=" + home}
	run := func(args ...string) string {
		t.Helper()
		r := cortexq(t, env, args...)
		require.Equal(t, 0, r.code, "cortexq %v:\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
		return r.stdout
	}
	t.Cleanup(func() { cortexq(t, env, "db", "stop") })

	require.Contains(t, run("db", "start"), "started the embedded PostgreSQL in "+home)
	require.Contains(t, run("db", "start"), "is running")
	dsn := strings.TrimSpace(run("db", "url"))
	require.True(t, strings.HasPrefix(dsn, "postgres://postgres@/cortexq?host="), dsn)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	var fsync, listen string
	var views int
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('listen_addresses'),
		(SELECT count(*) FROM pg_views WHERE viewname LIKE 'audit_%')`).Scan(&fsync, &listen, &views))
	require.NoError(t, conn.Close(ctx))
	require.Equal(t, "on", fsync)
	require.Empty(t, listen, "unix socket only")
	require.Equal(t, 8, views, "migrated")

	run("service", "add", "echo")
	require.Contains(t, run("service", "list"), "echo")

	require.Contains(t, run("db", "stop"), "stopped the embedded PostgreSQL")
	require.Contains(t, run("db", "stop"), "is not running")
	// Any command starts it again; what was there is kept.
	require.Contains(t, run("service", "list"), "echo")
	require.Contains(t, run("db", "stop"), "stopped")
}

// TestPsqlGetsThePasswordThroughItsEnvironment runs `db psql` as a role whose password is
// checked, and reads psql's arguments as ps would while it runs.
func TestPsqlGetsThePasswordThroughItsEnvironment(t *testing.T) {
	d := newTestDB(t)
	role := testRole(t, d, "psql")
	password := fmt.Sprintf("pw-%d", time.Now().UnixNano())
	d.ok("db", "grant-audit", role, "--password", password)
	checkPasswords(t, d, role)

	cmd := exec.Command(binary(t), "db", "psql", "-X", "-At", "-c", "SELECT current_user, pg_sleep(2)")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+asRole(t, d.dsn, role, password))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Read the arguments of the process (cortexq, then psql: Debian's wrapper, then the real
	// one, in the same process) until it ends.
	seen := 0
	timeout := time.After(30 * time.Second)
	for running := true; running; {
		select {
		case err := <-done:
			require.NoError(t, err, errOut.String())
			running = false
		case <-timeout:
			t.Fatal("psql did not end within 30 s")
		case <-time.After(5 * time.Millisecond):
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
			if argv := strings.ReplaceAll(string(b), "\x00", " "); err == nil && strings.Contains(argv, "psql") {
				seen++
				require.NotContains(t, argv, password)
			}
		}
	}
	require.NotZero(t, seen, "psql's arguments were read")
	require.Equal(t, role+"|", strings.TrimSpace(out.String()), "psql logged in with the password")
}
