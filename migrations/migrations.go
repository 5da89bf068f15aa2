// Package migrations holds cortexq's schema as goose migrations, embedded in the binary, with
// River's own tables applied by a Go migration through rivermigrate.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/jackc/pgx/v5/pgconn"
	// The pgx database/sql driver, registered as "pgx".
	_ "github.com/jackc/pgx/v5/stdlib"
)

//go:embed *.sql
var sqlFiles embed.FS

// FS holds the SQL migrations.
var FS fs.FS = sqlFiles

// riverVersion is the goose version of the migration that applies River's tables.
const riverVersion = 2

func riverMigration() *goose.Migration {
	// River's versions cannot share one transaction (an enum value is added, then used), so
	// this migration runs outside goose's transaction and River applies each version in its own.
	run := func(direction rivermigrate.Direction) func(context.Context, *sql.DB) error {
		return func(ctx context.Context, db *sql.DB) error {
			migrator, err := rivermigrate.New(riverdatabasesql.New(db), nil)
			if err != nil {
				return fmt.Errorf("river migrator: %w", err)
			}
			opts := &rivermigrate.MigrateOpts{}
			if direction == rivermigrate.DirectionDown {
				opts.TargetVersion = -1
			}
			if _, err := migrator.Migrate(ctx, direction, opts); err != nil {
				return fmt.Errorf("river migrate %s: %w", direction, err)
			}
			return nil
		}
	}
	return goose.NewGoMigration(riverVersion,
		&goose.GoFunc{RunDB: run(rivermigrate.DirectionUp)},
		&goose.GoFunc{RunDB: run(rivermigrate.DirectionDown)},
	)
}

// NewProvider returns a goose provider for db with every cortexq migration.
func NewProvider(db *sql.DB) (*goose.Provider, error) {
	return goose.NewProvider(goose.DialectPostgres, db, FS,
		goose.WithGoMigrations(riverMigration()),
		goose.WithDisableGlobalRegistry(true),
	)
}

// Open opens dsn with the pgx database/sql driver, for migrations.
func Open(dsn string) (*sql.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return db, nil
}

// IsLockTimeout reports whether err is a statement that gave up waiting for a lock.
func IsLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03" // lock_not_available
}

// Up applies every pending migration to the database at dsn.
func Up(ctx context.Context, dsn string) error {
	db, err := Open(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := NewProvider(db)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// Latest is the version of the newest migration this binary holds: the schema it expects.
func Latest() int64 {
	var latest int64
	names, _ := fs.Glob(FS, "*.sql") // Glob's only error is a bad pattern
	for _, name := range names {
		if v, err := goose.NumericComponent(name); err == nil && v > latest {
			latest = v
		}
	}
	return max(latest, riverVersion)
}
