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
	if sources := p.ListSources(); len(sources) > 0 && current > sources[len(sources)-1].Version {
		logger.Warn("the database schema is newer than this binary: run the cortexq that migrated it",
			"schema_version", current, "binary_knows_up_to", sources[len(sources)-1].Version)
	}
	return nil
}
