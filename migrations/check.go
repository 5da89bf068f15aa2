package migrations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// ErrNotMigrated is Check's answer for a database whose schema is missing or behind this
// binary's migrations.
var ErrNotMigrated = errors.New("the database schema is not up to date: run `cortexq migrate up` first")

// Check reports whether the database behind pool has every migration this binary knows:
// ErrNotMigrated when its schema is missing or behind, so that a command is refused with the
// command that fixes it, not met later with "relation does not exist". A schema newer than this
// binary is said on logger (a rolling upgrade runs both binaries for a while), not refused.
func Check(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	// goose makes its version table when it is missing: a command pointed at the wrong database
	// would leave one there. No version table is no schema.
	var versioned bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", goose.DefaultTablename).Scan(&versioned); err != nil {
		return fmt.Errorf("check the schema: %w", err)
	}
	if !versioned {
		return ErrNotMigrated
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := NewProvider(db)
	if err != nil {
		return err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("check the schema: %w", err)
	}
	if pending {
		return ErrNotMigrated
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("check the schema: %w", err)
	}
	if err := checkWindow(ctx, pool, current); err != nil {
		return err
	}
	if latest := Latest(); current > latest {
		logger.Info("the database schema is newer than this binary, within its upgrade window (a rolling upgrade): replace this replica with the release that migrated it",
			"schema_version", current, "binary_expects", latest)
	}
	return nil
}

// TooOldError is Check's answer for a database migrated past what this binary can run with: a
// migration that contracts the schema raised the upgrade window's oldest schema above the one
// this binary expects (docs/operations.md, "Upgrades").
type TooOldError struct {
	Schema        int64  // the database's schema version
	Expects       int64  // the schema this binary expects (Latest)
	OldestSchema  int64  // the oldest schema a binary may expect and still run
	OldestRelease string // the first release that may run
}

func (e *TooOldError) Error() string {
	return fmt.Sprintf("the database schema (version %d) was migrated past what this binary can run with: it expects schema %d, "+
		"and the database admits binaries of schema %d or later: install cortexq %s or newer (see CHANGELOG.md)",
		e.Schema, e.Expects, e.OldestSchema, e.OldestRelease)
}

// checkWindow refuses this binary when the database's upgrade window (table upgrade_window,
// 00027) starts after the schema it expects.
func checkWindow(ctx context.Context, pool *pgxpool.Pool, current int64) error {
	var oldest int64
	var release string
	err := pool.QueryRow(ctx, "SELECT oldest_schema, oldest_release FROM upgrade_window").Scan(&oldest, &release)
	if err != nil {
		return fmt.Errorf("check the schema's upgrade window: %w", err)
	}
	if Latest() < oldest {
		return &TooOldError{Schema: current, Expects: Latest(), OldestSchema: oldest, OldestRelease: release}
	}
	return nil
}
