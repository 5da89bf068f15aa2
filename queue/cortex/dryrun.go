package cortex

import (
	"context"
	"fmt"
)

// count counts, per CorTeX table, the rows an import of the corpora chosen would read.
func (im *importer) count(ctx context.Context) ([]TableCount, error) {
	var corpora []int32
	for _, c := range im.reg.corpora {
		corpora = append(corpora, c.cortexID)
	}
	out := []TableCount{{Table: "services", Rows: int64(len(im.reg.services))}, {Table: "corpora", Rows: int64(len(corpora))}}
	type query struct {
		table, sql string
		args       []any
	}
	scoped := " m JOIN tasks t ON t.id = m.task_id WHERE t.corpus_id = ANY($1)"
	qs := []query{
		{"tasks", "SELECT count(*) FROM tasks WHERE corpus_id = ANY($1) AND service_id <> ALL($2)", []any{corpora, []int32{im.reg.importID, im.reg.initID}}},
		{"tasks (entries)", "SELECT count(*) FROM tasks WHERE corpus_id = ANY($1) AND service_id = $2", []any{corpora, im.reg.importID}},
	}
	for _, l := range logTables {
		qs = append(qs, query{l.table, "SELECT count(*) FROM " + l.table + scoped + " AND t.status BETWEEN -5 AND -1", []any{corpora}})
	}
	qs = append(qs, query{"historical_runs", "SELECT count(*) FROM historical_runs WHERE corpus_id = ANY($1)", []any{corpora}},
		query{"historical_tasks", "SELECT count(*) FROM historical_tasks" + scoped, []any{corpora}},
		query{"worker_metadata", "SELECT count(*) FROM worker_metadata", nil})
	if im.shape.runtimes {
		qs = append(qs, query{"task_runtimes", "SELECT count(*) FROM task_runtimes" + scoped, []any{corpora}})
	}
	for _, q := range qs {
		tc := TableCount{Table: q.table}
		if err := im.src.QueryRow(ctx, q.sql, q.args...).Scan(&tc.Rows); err != nil {
			return nil, fmt.Errorf("count %s: %w", q.table, err)
		}
		out = append(out, tc)
	}
	return out, nil
}
