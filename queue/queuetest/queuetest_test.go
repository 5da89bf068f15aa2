package queuetest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/migrations"
	"github.com/cortexq/cortexq/queue/queuetest"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

var migratedTables = []string{"dispatch", "tasks", "river_job"}

// tablesPresent reports, per table, whether it exists in the database at dsn.
func tablesPresent(t *testing.T, dsn string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	present := map[string]bool{}
	for _, table := range migratedTables {
		var ok bool
		require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok))
		present[table] = ok
	}
	return present
}

func currentDatabase(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var name string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&name))
	return name
}

func allTables(present bool) map[string]bool {
	m := map[string]bool{}
	for _, table := range migratedTables {
		m[table] = present
	}
	return m
}

func TestNewDB(t *testing.T) {
	t.Run("TwoCallsGiveDistinctMigratedDatabases", func(t *testing.T) {
		a, b := queuetest.NewDB(t), queuetest.NewDB(t)
		require.NotEqual(t, currentDatabase(t, a), currentDatabase(t, b))
		require.Equal(t, allTables(true), tablesPresent(t, a))
		require.Equal(t, allTables(true), tablesPresent(t, b))

		ctx := context.Background()
		conn, err := pgx.Connect(ctx, a)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE only_in_a (id int)")
		require.NoError(t, err)
		connB, err := pgx.Connect(ctx, b)
		require.NoError(t, err)
		defer connB.Close(ctx)
		var found bool
		require.NoError(t, connB.QueryRow(ctx, "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&found))
		require.False(t, found)
	})

	t.Run("MigrationsGoDownToZeroAndUpAgain", func(t *testing.T) {
		dsn := queuetest.NewDB(t)
		ctx := context.Background()
		db, err := migrations.Open(dsn)
		require.NoError(t, err)
		defer db.Close()
		p, err := migrations.NewProvider(db)
		require.NoError(t, err)
		_, err = p.DownTo(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, allTables(false), tablesPresent(t, dsn))
		require.NoError(t, migrations.Up(ctx, dsn))
		require.Equal(t, allTables(true), tablesPresent(t, dsn))
	})

	t.Run("ParallelTestsEachGetADatabase", func(t *testing.T) {
		var seen sync.Map
		for i := range 8 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				pool := queuetest.NewPool(t)
				ctx := context.Background()
				var name string
				require.NoError(t, pool.QueryRow(ctx, "SELECT current_database()").Scan(&name))
				_, dup := seen.LoadOrStore(name, i)
				require.False(t, dup, "database %s handed out twice", name)
				var n int
				require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM tasks").Scan(&n))
				require.Zero(t, n)
			})
		}
	})
}

func TestNewCluster(t *testing.T) {
	t.Run("StopStartAndRestartAffectOnlyThePrivateCluster", func(t *testing.T) {
		c := queuetest.NewCluster(t)
		dsn := c.NewDB(t)
		require.Equal(t, allTables(true), tablesPresent(t, dsn))
		shared := queuetest.NewPool(t)
		ctx := context.Background()

		c.Restart(t)
		require.Equal(t, allTables(true), tablesPresent(t, dsn))

		c.Stop(t)
		_, err := pgx.Connect(ctx, dsn)
		require.Error(t, err)
		require.NoError(t, shared.Ping(ctx), "the shared cluster must keep running")

		c.Start(t)
		require.Equal(t, allTables(true), tablesPresent(t, dsn))
	})

	t.Run("DatabasesOfAStoppedClusterNeedNoCleanup", func(t *testing.T) {
		c := queuetest.NewCluster(t)
		c.NewDB(t)
		c.Stop(t)
	})
}

// TestWatchdogCleansUpAfterKill9: a test process killed with SIGKILL leaves no cluster behind:
// its watchdog stops the server and removes the directory.
func TestWatchdogCleansUpAfterKill9(t *testing.T) {
	if os.Getenv("QUEUETEST_CHILD") == "1" {
		c := queuetest.NewCluster(t)
		dsn := c.NewDB(t)
		conn, err := pgx.Connect(context.Background(), dsn)
		require.NoError(t, err)
		var dir string
		require.NoError(t, conn.QueryRow(context.Background(), "SELECT current_setting('data_directory')").Scan(&dir))
		fmt.Println("DATADIR", dir)
		time.Sleep(time.Minute) // killed before this ends
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdogCleansUpAfterKill9$", "-test.v")
	cmd.Env = append(os.Environ(), "QUEUETEST_CHILD=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var dataDir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "DATADIR "); ok {
			dataDir = d
			break
		}
	}
	require.NotEmpty(t, dataDir, "the child test printed its cluster's data directory")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // killed: its error is the kill
	go func() { _, _ = io.Copy(io.Discard, out) }()

	// The watchdog notices the closed pipe at once; pg_ctl stop -m immediate takes a moment.
	// Bounded wait: 600 polls of 100 ms.
	dir := filepath.Dir(dataDir)
	for range 600 {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the killed test's cluster directory %s is still there after 60 s", dir)
}
