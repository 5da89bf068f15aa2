package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

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
	require.Equal(t, 6, views, "migrated")

	run("service", "add", "echo")
	require.Contains(t, run("service", "list"), "echo")

	require.Contains(t, run("db", "stop"), "stopped the embedded PostgreSQL")
	require.Contains(t, run("db", "stop"), "is not running")
	// Any command starts it again; what was there is kept.
	require.Contains(t, run("service", "list"), "echo")
	require.Contains(t, run("db", "stop"), "stopped")
}
