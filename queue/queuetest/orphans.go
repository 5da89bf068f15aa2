package queuetest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// orphanKeys are the key columns Orphans checks, and the table each must point into.
var orphanKeys = map[string]string{"corpus_id": "corpora", "service_id": "services", "task_id": "tasks",
	"run_id": "runs", "parent_corpus_id": "corpora"}

// Orphans counts, per table and key column, the rows that point at a corpus, service, task or
// run that does not exist. The tables are read from information_schema: every base table with
// one of those columns, so that a table added later is checked too. Nothing orphaned: an empty
// map.
func Orphans(ctx context.Context, pool *pgxpool.Pool) (map[string]int64, error) {
	rows, err := pool.Query(ctx, `
		SELECT c.table_name::text, c.column_name::text
		FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
		  AND c.column_name IN ('corpus_id', 'service_id', 'task_id', 'run_id', 'parent_corpus_id')
		ORDER BY 1, 2`)
	if err != nil {
		return nil, err
	}
	type key struct{ table, column string }
	var keys []key
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.table, &k.column); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(keys) < 10 {
		return nil, fmt.Errorf("only %d keyed tables found: the wrong schema?", len(keys))
	}
	out := map[string]int64{}
	for _, k := range keys {
		var n int64
		q := fmt.Sprintf(`SELECT count(*) FROM %[1]q x WHERE x.%[2]q IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM %[3]q p WHERE p.id = x.%[2]q)`, k.table, k.column, orphanKeys[k.column])
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", k.table, k.column, err)
		}
		if n > 0 {
			out[k.table+"."+k.column] = n
		}
	}
	return out, nil
}
