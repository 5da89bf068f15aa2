package cortex

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// deferredTables are the tables whose secondary indexes a first import builds after its rows
// rather than row by row: task_entries' trigram index (task_entries_trgm, about 50 keys an
// entry, which grows a row at a time several times slower than it builds from the whole table;
// docs/performance.md, "Import from CorTeX at scale").
var deferredTables = []string{"task_entries"}

// rebuildMemory is what building the deferred indexes may use (SET LOCAL: this transaction's).
const rebuildMemory = `SET LOCAL maintenance_work_mem = '1GB'`

// deferIndexes drops the secondary indexes of deferredTables (neither unique nor a constraint's)
// when cortexq has no task at all, a first import, and returns their definitions for
// rebuildIndexes. With tasks already there it drops nothing: an index dropped then would hold
// the search, and every other writer of those tables, until the import commits, and rebuilding
// it over the tasks already indexed costs more than adding the new ones to it. The drop is in
// the corpus's transaction: an import that fails or is stopped leaves the indexes as they were.
// A role that may not drop them (not the tables' owner) imports with the indexes in place.
func deferIndexes(ctx context.Context, dst pgx.Tx) ([]string, error) {
	var empty bool
	if err := dst.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM tasks)`).Scan(&empty); err != nil || !empty {
		return nil, err
	}
	rows, err := dst.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname), pg_get_indexdef(i.indexrelid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE i.indrelid = ANY (SELECT to_regclass(t)::oid FROM unnest($1::text[]) t)
		  AND NOT i.indisunique
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
		ORDER BY 1`, deferredTables)
	if err != nil {
		return nil, err
	}
	var names, defs []string
	var name, def string
	if _, err := pgx.ForEachRow(rows, []any{&name, &def}, func() error {
		names, defs = append(names, name), append(defs, def)
		return nil
	}); err != nil || len(names) == 0 {
		return nil, err
	}
	err = pgx.BeginFunc(ctx, dst, func(sp pgx.Tx) error { // a savepoint
		_, err := sp.Exec(ctx, "DROP INDEX "+strings.Join(names, ", "))
		return err
	})
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("drop the indexes a first import builds after its rows: %w", err)
	}
	return defs, nil
}

// rebuildIndexes builds again the indexes deferIndexes dropped.
func rebuildIndexes(ctx context.Context, dst pgx.Tx, defs []string) error {
	if len(defs) == 0 {
		return nil
	}
	if _, err := dst.Exec(ctx, rebuildMemory); err != nil {
		return err
	}
	for _, def := range defs {
		if _, err := dst.Exec(ctx, def); err != nil {
			return fmt.Errorf("build again %q: %w", def, err)
		}
	}
	return nil
}
