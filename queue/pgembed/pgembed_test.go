package pgembed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// newCluster returns a cluster in dir, stopped at the end of the test.
func newCluster(t *testing.T, dir string, setup func(context.Context, string) error) *Cluster {
	t.Helper()
	c, err := New(Config{Dir: dir, SetupFunc: setup})
	require.NoError(t, err)
	t.Cleanup(func() {
		if _, err := c.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return c
}

func query(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var s string
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&s))
	return s
}

func TestStartCreatesSetsUpOnceAndKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setups := 0
	c := newCluster(t, filepath.Join(t.TempDir(), "home"), func(ctx context.Context, dsn string) error {
		setups++
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `CREATE TABLE marker (v text); INSERT INTO marker VALUES ('set up')`)
		return err
	})
	running, err := c.Running(ctx)
	require.NoError(t, err)
	require.False(t, running)
	require.False(t, c.Initialized())

	started, err := c.Start(ctx)
	require.NoError(t, err)
	require.True(t, started)
	require.True(t, c.Initialized())
	require.Equal(t, 1, setups)
	require.Equal(t, "set up", query(t, c.DSN(), `SELECT v FROM marker`))
	require.Equal(t, "on", query(t, c.DSN(), `SELECT current_setting('fsync')`))
	require.Equal(t, "on", query(t, c.DSN(), `SELECT current_setting('synchronous_commit')`))
	require.Equal(t, "", query(t, c.DSN(), `SELECT current_setting('listen_addresses')`))
	require.Equal(t, "0700", query(t, c.DSN(), `SELECT current_setting('unix_socket_permissions')`))

	started, err = c.Start(ctx)
	require.NoError(t, err)
	require.False(t, started, "already running")

	stopped, err := c.Stop(ctx)
	require.NoError(t, err)
	require.True(t, stopped)
	stopped, err = c.Stop(ctx)
	require.NoError(t, err)
	require.False(t, stopped)

	started, err = c.Start(ctx)
	require.NoError(t, err)
	require.True(t, started)
	require.Equal(t, 1, setups, "set up once")
	require.Equal(t, "set up", query(t, c.DSN(), `SELECT v FROM marker`))
}

func TestFailedSetupIsTriedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fail := true
	c := newCluster(t, filepath.Join(t.TempDir(), "home"), func(ctx context.Context, dsn string) error {
		if fail {
			return errors.New("no luck")
		}
		return nil
	})
	_, err := c.Start(ctx)
	require.ErrorContains(t, err, "no luck")
	fail = false
	_, err = c.Start(ctx)
	require.NoError(t, err)
	require.Equal(t, "cortexq", query(t, c.DSN(), `SELECT current_database()`))
	require.Equal(t, "0", query(t, c.DSN(), `SELECT count(*)::text FROM pg_database WHERE datname = 'cortexq_setup'`))
}

func TestLongPathPutsTheSocketInTmp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-long-directory-name-", 5), "home")
	c := newCluster(t, dir, nil)
	require.True(t, strings.HasPrefix(c.SocketDir(), "/tmp/cortexq-"), c.SocketDir())
	t.Cleanup(func() { os.RemoveAll(c.SocketDir()) }) // runs before the stop: the server does not mind
	_, err := c.Start(ctx)
	require.NoError(t, err)
	require.Equal(t, "cortexq", query(t, c.DSN(), `SELECT current_database()`))
}

func TestNewNeedsBinaries(t *testing.T) {
	_, err := New(Config{Dir: t.TempDir(), BinDir: t.TempDir()})
	require.ErrorContains(t, err, "holds no initdb, pg_ctl and postgres")
}
