package cortex

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// required lists the CorTeX tables and columns an import reads.
var required = map[string][]string{
	"services":         {"id", "name", "version", "description"},
	"corpora":          {"id", "name", "path", "description", "parent_corpus_id", "selection"},
	"tasks":            {"id", "service_id", "corpus_id", "status", "entry"},
	"log_infos":        logColumns,
	"log_warnings":     logColumns,
	"log_errors":       logColumns,
	"log_fatals":       logColumns,
	"log_invalids":     logColumns,
	"historical_runs":  {"id", "service_id", "corpus_id", "total", "invalid", "fatal", "error", "warning", "no_problem", "in_progress", "start_time", "end_time", "owner", "description"},
	"historical_tasks": {"id", "task_id", "status", "saved_at"},
	"worker_metadata":  {"id", "service_id", "total_dispatched", "total_returned", "first_seen", "time_last_dispatch", "time_last_return", "name"},
}

var logColumns = []string{"id", "task_id", "category", "what", "details"}

// shape is what of the optional parts a CorTeX database has.
type shape struct {
	runtimes     bool // task_runtimes (CorTeX since 2026-06)
	leaseTimeout bool // services.lease_timeout_seconds
}

// checkShape reads the columns of the source's schema (those the role may read) and names every
// table or column an import needs that is missing.
func checkShape(ctx context.Context, src pgx.Tx) (shape, error) {
	rows, err := src.Query(ctx, `SELECT table_name::text, column_name::text FROM information_schema.columns
		WHERE table_schema = current_schema()`)
	if err != nil {
		return shape{}, fmt.Errorf("read the CorTeX schema: %w", err)
	}
	have := map[string]map[string]bool{}
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			return shape{}, fmt.Errorf("read the CorTeX schema: %w", err)
		}
		if have[table] == nil {
			have[table] = map[string]bool{}
		}
		have[table][column] = true
	}
	if err := rows.Err(); err != nil {
		return shape{}, fmt.Errorf("read the CorTeX schema: %w", err)
	}
	var missing []string
	for table, columns := range required {
		if have[table] == nil {
			missing = append(missing, "table "+table)
			continue
		}
		for _, c := range columns {
			if !have[table][c] {
				missing = append(missing, "column "+table+"."+c)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return shape{}, fmt.Errorf("not a CorTeX database this import knows (or the role may not read it): missing %s", strings.Join(missing, ", "))
	}
	rt := have["task_runtimes"]
	return shape{runtimes: rt["task_id"] && rt["runtime_ms"], leaseTimeout: have["services"]["lease_timeout_seconds"]}, nil
}
