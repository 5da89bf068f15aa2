package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/pgembed"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// emptyDB creates a database on the test server with no schema at all, dropped in t.Cleanup
// (registered first, so it runs after what the test registers later), and returns its
// connection string.
func emptyDB(t *testing.T, name string) string {
	t.Helper()
	cl := queuetest.Shared(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cl.AdminDSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	name = fmt.Sprintf("%s_%d_%d", name, os.Getpid(), time.Now().UnixNano()%1_000_000)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, cl.AdminDSN())
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			conn.Close(ctx)
		}
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return cl.DSN(name)
}

// startPgBouncer runs Debian's pgbouncer (as the postgres user: it refuses root) on a loopback
// port in front of the database of dsn, in pool_mode mode, and returns the connection string
// through it. It is stopped in t.Cleanup.
func startPgBouncer(t *testing.T, dsn, mode string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	require.NoError(t, err, "pgbouncer not installed: run scripts/install-deps")
	pc, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	dir, err := os.MkdirTemp("/tmp", "cortexq-pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	cred, err := pgembed.ServerCredential()
	require.NoError(t, err)
	if cred != nil {
		require.NoError(t, os.Chown(dir, int(cred.Uid), int(cred.Gid)))
	}
	port := loopbackPort(t)
	password := ""
	if pc.Password != "" {
		password = " password=" + pc.Password
	}
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%d dbname=%s user=%s%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s/users.txt
pool_mode = %s
default_pool_size = 20
max_client_conn = 200
logfile = %s/pgbouncer.log
`, pc.Database, pc.Host, pc.Port, pc.Database, pc.User, password, port, dir, mode, dir)
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q %q\n", pc.User, "")} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		if cred != nil {
			require.NoError(t, os.Chown(path, int(cred.Uid), int(cred.Gid)))
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // killed: its exit status says so
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "pgbouncer listens on %s", addr)
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pc.User, addr, pc.Database)
}

// TestPgBouncer runs every kind of command through Debian's PgBouncer in session and in
// transaction mode, with --pooler saying which: migrate an empty database, a bench (replicas
// and workers to completion: every task NoProblem, every archive byte-identical), status,
// report, runs, task show and the dashboard's pages. Without --pooler, the transaction-mode
// pooler's clash of prepared statements is named, with the flag that avoids it.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{poolerSession, poolerTransaction} {
		t.Run(mode, func(t *testing.T) { // one at a time: two benches' free ports could meet
			dsn := startPgBouncer(t, emptyDB(t, "pgb_"+mode), mode)
			d := &testDB{t: t, env: []string{"DATABASE_URL=" + dsn, "CORTEXQ_POOLER=" + mode}}
			require.Contains(t, d.ok("migrate", "up"), "00025")
			out := d.ok("bench", "--tasks", "150", "--workers", "2", "--payload-kb", "1", "--dir", t.TempDir())
			require.Contains(t, out, "gates: lost 0, NoProblem 150 of 150, archives differing 0 → ok")
			status := d.ok("status")
			corpus := regexp.MustCompile(`bench-[0-9.-]+`).FindString(status)
			require.NotEmpty(t, corpus, status)
			require.Contains(t, d.ok("report", "--corpus", corpus, "--service", "bench_echo"), "no_problem  150")
			require.Contains(t, d.ok("runs", "--corpus", corpus, "--service", "bench_echo"), "150 (100.00%)")
			require.Contains(t, d.ok("task", "show", "1"), "status   no_problem (-1)")
			web, base := d.startWeb()
			for _, path := range []string{"/", "/report?corpus=" + corpus + "&service=bench_echo", "/runs?corpus=" + corpus + "&service=bench_echo",
				"/task/1", "/workers"} {
				code, body := get(t, base+path)
				require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
			}
			require.Equal(t, 0, web.stop(syscall.SIGTERM, 10*time.Second))
			if mode == poolerTransaction {
				require.Contains(t, web.log(), "cannot set its session settings")
				// Without --pooler: pgx's named statements meet other clients' server sessions.
				bare := &testDB{t: t, env: []string{"DATABASE_URL=" + dsn}}
				var r result
				for range 5 {
					if r = cortexq(t, bare.env, "status"); r.code != 0 {
						break
					}
				}
				require.NotEqual(t, 0, r.code, "status without --pooler through a transaction-mode pooler")
				require.Contains(t, r.stderr, "give --pooler transaction", r.stderr)
			} else {
				require.NotContains(t, web.log(), "session settings", "session mode: SET per connection")
			}
		})
	}
}

// TestPoolerRefusesAnUnknownMode: --pooler takes none, session or transaction.
func TestPoolerRefusesAnUnknownMode(t *testing.T) {
	d := newTestDB(t)
	r := cortexq(t, d.env, "--pooler", "statement", "status")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, `--pooler "statement": want none, session or transaction`)
}
