package bench

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The bench's --statements: what the database ran during the measurement, statement by
// statement, from pg_stat_statements (docs/performance.md#replicas-sharing-one-database).

// statementsHint says how to make pg_stat_statements available to the bench.
const statementsHint = "--statements reads pg_stat_statements, which the server must preload: " +
	"ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements' (cortexq db psql), then restart " +
	"the server (cortexq db stop; cortexq db start)"

// statementsReset makes sure the extension exists and empties its counters: the measurement
// starts from zero.
func statementsReset(ctx context.Context, pool *pgxpool.Pool) error {
	var preload string
	if err := pool.QueryRow(ctx, "SELECT current_setting('shared_preload_libraries')").Scan(&preload); err != nil {
		return fmt.Errorf("statements: %w", err)
	}
	if !strings.Contains(preload, "pg_stat_statements") {
		return fmt.Errorf("the server does not preload pg_stat_statements (shared_preload_libraries = %q); %s", preload, statementsHint)
	}
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return fmt.Errorf("statements: create the extension: %w; %s", err, statementsHint)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return fmt.Errorf("statements: reset: %w", err)
	}
	return nil
}

// StatementStat is one statement's work during a measurement, per task converted: how often it
// ran, the rows it returned or wrote, its execution time and the shared buffers it touched
// (hit or read).
type StatementStat struct {
	Name          string  `json:"name"`
	CallsPerTask  float64 `json:"calls_per_task"`
	RowsPerCall   float64 `json:"rows_per_call"`
	ExecMicros    float64 `json:"exec_us_per_task"`
	BuffersPerTsk float64 `json:"shared_blks_per_task"`
}

// sqlcName finds the name sqlc gives a query ("-- name: Reserve :many"); pgx batches keep it.
var sqlcName = regexp.MustCompile(`--\s*name:\s*(\w+)`)

// statementName names a statement by its sqlc name, else by its first words.
func statementName(q string) string {
	if m := sqlcName.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	f := strings.Fields(q)
	if len(f) > 6 {
		f = f[:6]
	}
	return strings.Join(f, " ")
}

// statementsRead reads the counters of the database's statements, grouped by name, per task
// (tasks converted), most execution time first, leaving out the bench's own (its drain checks
// and the reset).
func statementsRead(ctx context.Context, pool *pgxpool.Pool, tasks int64) ([]StatementStat, error) {
	rows, err := pool.Query(ctx, `SELECT query, calls, rows, total_exec_time, shared_blks_hit + shared_blks_read
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		return nil, fmt.Errorf("statements: %w", err)
	}
	defer rows.Close()
	type acc struct{ calls, rows, ms, blks float64 }
	byName := map[string]*acc{}
	for rows.Next() {
		var q string
		var calls, nrows, blks int64
		var ms float64
		if err := rows.Scan(&q, &calls, &nrows, &ms, &blks); err != nil {
			return nil, fmt.Errorf("statements: %w", err)
		}
		name := statementName(q)
		if strings.HasPrefix(name, "Bench") || strings.Contains(q, "pg_stat_statements") {
			continue
		}
		a := byName[name]
		if a == nil {
			a = &acc{}
			byName[name] = a
		}
		a.calls, a.rows, a.ms, a.blks = a.calls+float64(calls), a.rows+float64(nrows), a.ms+ms, a.blks+float64(blks)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("statements: %w", err)
	}
	t := float64(max(tasks, 1))
	round := func(v float64, d float64) float64 { return math.Round(v*d) / d }
	var out []StatementStat
	for name, a := range byName {
		s := StatementStat{Name: name, CallsPerTask: round(a.calls/t, 1e4), ExecMicros: round(a.ms*1e3/t, 100),
			BuffersPerTsk: round(a.blks/t, 100)}
		if a.calls > 0 {
			s.RowsPerCall = round(a.rows/a.calls, 10)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ExecMicros > out[j].ExecMicros })
	return out, nil
}

// statementsTotal sums the statements: calls, execution time and buffers per task.
func statementsTotal(st []StatementStat) StatementStat {
	sum := StatementStat{Name: "all"}
	for _, s := range st {
		sum.CallsPerTask += s.CallsPerTask
		sum.ExecMicros += s.ExecMicros
		sum.BuffersPerTsk += s.BuffersPerTsk
	}
	sum.CallsPerTask = math.Round(sum.CallsPerTask*1e4) / 1e4
	sum.ExecMicros = math.Round(sum.ExecMicros*100) / 100
	sum.BuffersPerTsk = math.Round(sum.BuffersPerTsk*100) / 100
	return sum
}

// formatStatements prints the statements as a table, at most limit of them.
func formatStatements(st []StatementStat, limit int) string {
	var b strings.Builder
	tot := statementsTotal(st)
	fmt.Fprintf(&b, "statements per task (pg_stat_statements, the measurement only): %.3f calls, %.1f µs executing, %.1f shared buffers\n",
		tot.CallsPerTask, tot.ExecMicros, tot.BuffersPerTsk)
	fmt.Fprintf(&b, "  %-28s %10s %9s %9s %9s\n", "statement", "calls/task", "rows/call", "µs/task", "blks/task")
	for i, s := range st {
		if i == limit {
			fmt.Fprintf(&b, "  (%d more)\n", len(st)-limit)
			break
		}
		name := s.Name
		if len(name) > 28 {
			name = name[:28]
		}
		fmt.Fprintf(&b, "  %-28s %10.4f %9.1f %9.2f %9.2f\n", name, s.CallsPerTask, s.RowsPerCall, s.ExecMicros, s.BuffersPerTsk)
	}
	return strings.TrimRight(b.String(), "\n")
}
