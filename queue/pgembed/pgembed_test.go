package pgembed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	t.Cleanup(func() { os.RemoveAll(c.sock) }) // runs before the stop: the server does not mind
	_, err := c.Start(ctx)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(c.sock, "/tmp/cortexq-"), c.sock)
	require.Equal(t, "cortexq", query(t, c.DSN(), `SELECT current_database()`))
}

// TestLongPathSocketDirIsPrivate plants a symbolic link where a guessing user would (the name
// the socket directory once had, from a hash of the path) and checks that its target is left
// alone and the socket goes to a directory of the server's own.
func TestLongPathSocketDirIsPrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-long-directory-name-", 5), "home")
	sum := sha256.Sum256([]byte(dir))
	guessed := filepath.Join("/tmp", "cortexq-"+hex.EncodeToString(sum[:8]))
	victim := t.TempDir()
	require.NoError(t, os.Chmod(victim, 0o755))
	require.NoError(t, os.Symlink(victim, guessed))
	t.Cleanup(func() { os.Remove(guessed) })

	c := newCluster(t, dir, nil)
	t.Cleanup(func() { os.RemoveAll(c.sock) }) // runs before the stop: the server does not mind
	_, err := c.Start(ctx)
	require.NoError(t, err)
	fi, err := os.Stat(victim)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the link's target keeps its mode")
	require.Equal(t, uint32(os.Geteuid()), fi.Sys().(*syscall.Stat_t).Uid, "the link's target keeps its owner")
	require.NotEqual(t, guessed, c.sock)
	fi, err = os.Lstat(c.sock)
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "a directory, not a link: %s", fi.Mode())
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.Equal(t, c.cred.Uid, fi.Sys().(*syscall.Stat_t).Uid, "the server user's")

	// Another process finds the socket; a restart uses the same directory.
	other, err := New(Config{Dir: dir})
	require.NoError(t, err)
	require.Equal(t, c.sock, other.sock)
	require.Equal(t, "cortexq", query(t, other.DSN(), `SELECT current_database()`))
	sock := c.sock
	_, err = c.Stop(ctx)
	require.NoError(t, err)
	_, err = c.Start(ctx)
	require.NoError(t, err)
	require.Equal(t, sock, c.sock)
}

func TestNewNeedsBinaries(t *testing.T) {
	_, err := New(Config{Dir: t.TempDir(), BinDir: t.TempDir()})
	require.ErrorContains(t, err, "holds no initdb, pg_ctl and postgres")
}
