package migrations_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/migrations"
	"github.com/cortexq/cortexq/queue/queuetest"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

func TestCheck(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)

	t.Run("MigratedDatabasePasses", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, migrations.Check(ctx, queuetest.NewPool(t), quiet))
	})

	t.Run("NoVersionTableIsNotMigrated", func(t *testing.T) {
		t.Parallel()
		pool := queuetest.NewPool(t)
		_, err := pool.Exec(ctx, `DROP TABLE goose_db_version`)
		require.NoError(t, err)
		require.ErrorIs(t, migrations.Check(ctx, pool, quiet), migrations.ErrNotMigrated)
		var made bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&made))
		require.False(t, made, "the check leaves no version table behind")
	})

	t.Run("PendingMigrationIsNotMigrated", func(t *testing.T) {
		t.Parallel()
		pool := queuetest.NewPool(t)
		_, err := pool.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`)
		require.NoError(t, err)
		require.ErrorIs(t, migrations.Check(ctx, pool, quiet), migrations.ErrNotMigrated)
	})

	t.Run("NewerSchemaIsSaidNotRefused", func(t *testing.T) {
		t.Parallel()
		pool := queuetest.NewPool(t)
		_, err := pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`)
		require.NoError(t, err)
		var log bytes.Buffer
		require.NoError(t, migrations.Check(ctx, pool, slog.New(slog.NewTextHandler(&log, nil))))
		require.Contains(t, log.String(), "the database schema is newer than this binary")
		require.Contains(t, log.String(), "schema_version=99999")
	})

	t.Run("ContractedPastThisBinaryIsRefused", func(t *testing.T) {
		t.Parallel()
		pool := queuetest.NewPool(t)
		_, err := pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `UPDATE upgrade_window SET oldest_schema = $1, oldest_release = 'v9.0.0'`, migrations.Latest()+1)
		require.NoError(t, err)
		err = migrations.Check(ctx, pool, quiet)
		var tooOld *migrations.TooOldError
		require.ErrorAs(t, err, &tooOld)
		require.Equal(t, migrations.TooOldError{Schema: 99999, Expects: migrations.Latest(), OldestSchema: migrations.Latest() + 1,
			OldestRelease: "v9.0.0"}, *tooOld)
		require.Contains(t, err.Error(), "install cortexq v9.0.0 or newer")
	})

	t.Run("WindowOfThisReleaseAdmitsIt", func(t *testing.T) {
		t.Parallel()
		pool := queuetest.NewPool(t)
		var oldest int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT oldest_schema FROM upgrade_window`).Scan(&oldest))
		require.LessOrEqual(t, oldest, migrations.Latest())
		require.Equal(t, int64(25), oldest, "v0.1.0's replicas (schema 25) may still run: nothing contracted since")
	})
}

func TestLatestIsTheNewestMigration(t *testing.T) {
	db, err := migrations.Open("postgres://unused.invalid/none")
	require.NoError(t, err)
	defer db.Close()
	p, err := migrations.NewProvider(db)
	require.NoError(t, err)
	sources := p.ListSources()
	require.Equal(t, sources[len(sources)-1].Version, migrations.Latest())
}
