package cortex

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// cortexRun is one of CorTeX's historical_runs.
type cortexRun struct {
	cortexID                                                  int32
	serviceID                                                 int32 // cortexq's
	total, invalid, fatal, errors, warning, noProblem, inProg int64
	start                                                     time.Time
	end                                                       *time.Time // nil: the open run
	owner, description                                        string
	id                                                        int64 // cortexq's, once written
}

// readRuns reads the corpus's CorTeX runs of the services imported, oldest first. CorTeX's
// times are without zone: UTC.
func (im *importer) readRuns(ctx context.Context, c *corpus) ([]*cortexRun, error) {
	ids := map[int32]int32{}
	for _, s := range im.reg.services {
		ids[s.cortexID] = s.id
	}
	rows, err := im.src.Query(ctx, `SELECT id, service_id, coalesce(total, 0), coalesce(invalid, 0), coalesce(fatal, 0),
			coalesce(error, 0), coalesce(warning, 0), coalesce(no_problem, 0), coalesce(in_progress, 0),
			start_time AT TIME ZONE 'UTC', end_time AT TIME ZONE 'UTC', coalesce(owner, ''), coalesce(description, '')
		FROM historical_runs WHERE corpus_id = $1 ORDER BY start_time, id`, c.cortexID)
	if err != nil {
		return nil, fmt.Errorf("corpus %s: read its runs: %w", c.name, err)
	}
	var out []*cortexRun
	for rows.Next() {
		r := &cortexRun{}
		var svc int32
		if err := rows.Scan(&r.cortexID, &svc, &r.total, &r.invalid, &r.fatal, &r.errors, &r.warning, &r.noProblem,
			&r.inProg, &r.start, &r.end, &r.owner, &r.description); err != nil {
			return nil, fmt.Errorf("corpus %s: read its runs: %w", c.name, err)
		}
		if r.serviceID = ids[svc]; r.serviceID != 0 {
			out = append(out, r)
		}
	}
	return out, rows.Err()
}

// importRuns adds the corpus's runs cortexq lacks, closes those CorTeX closed since, and gives
// each closed run the task statuses of its snapshot.
func (im *importer) importRuns(ctx context.Context, dst pgx.Tx, c *corpus, sum *CorpusSummary) error {
	runs, err := im.readRuns(ctx, c)
	if err != nil {
		return err
	}
	for _, r := range runs {
		added, err := writeRun(ctx, dst, c, r)
		if err != nil {
			return err
		}
		if added {
			sum.Runs++
		}
	}
	byService := map[int32][]*cortexRun{}
	for _, r := range runs {
		byService[r.serviceID] = append(byService[r.serviceID], r)
	}
	for _, s := range im.reg.services {
		if err := im.importSnapshots(ctx, dst, c, s, byService[s.id], sum); err != nil {
			return err
		}
	}
	im.progress("corpus %s: %d runs added, %d task statuses of closed runs", c.name, sum.Runs, sum.Snapshots)
	return nil
}

// writeRun adds a run (a CorTeX open run only where the corpus and service has no open run), or
// updates the one imported before while it is still open. It reports whether it added one.
func writeRun(ctx context.Context, dst pgx.Tx, c *corpus, r *cortexRun) (bool, error) {
	counted := r.inProg + r.noProblem + r.warning + r.errors + r.fatal + r.invalid
	blocked := max(r.total-counted, 0)
	err := dst.QueryRow(ctx, `SELECT run_id FROM cortex_runs WHERE cortex_id = $1`, r.cortexID).Scan(&r.id)
	if err == nil {
		_, err = dst.Exec(ctx, `UPDATE runs SET ended_at = $2, tasks = $3, todo = $4, no_problem = $5, warning = $6,
				error = $7, fatal = $8, invalid = $9, blocked = $10, note = $11, owner = $12
			WHERE id = $1 AND ended_at IS NULL`, r.id, r.end, r.total, r.inProg, r.noProblem, r.warning, r.errors,
			r.fatal, r.invalid, blocked, r.description, r.owner)
		return false, wrapRun(c, r, err)
	}
	if err != pgx.ErrNoRows {
		return false, wrapRun(c, r, err)
	}
	err = dst.QueryRow(ctx, `INSERT INTO runs (corpus_id, service_id, started_at, ended_at, tasks, todo, no_problem,
			warning, error, fatal, invalid, blocked, note, owner)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
		WHERE $4::timestamptz IS NOT NULL
		   OR NOT EXISTS (SELECT 1 FROM runs WHERE corpus_id = $1 AND service_id = $2 AND ended_at IS NULL)
		RETURNING id`, c.id, r.serviceID, r.start, r.end, r.total, r.inProg, r.noProblem, r.warning, r.errors,
		r.fatal, r.invalid, blocked, r.description, r.owner).Scan(&r.id)
	if err == pgx.ErrNoRows {
		return false, nil // cortexq has an open run of its own
	}
	if err != nil {
		return false, wrapRun(c, r, err)
	}
	_, err = dst.Exec(ctx, `INSERT INTO cortex_runs (run_id, cortex_id) VALUES ($1, $2)`, r.id, r.cortexID)
	return err == nil, wrapRun(c, r, err)
}

func wrapRun(c *corpus, r *cortexRun, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("corpus %s: run %d: %w", c.name, r.cortexID, err)
}

// importSnapshots gives each closed run of a corpus and service the statuses of the last CorTeX
// snapshot taken while it was the newest run (CorTeX snapshots a run as it closes), unless it
// has statuses already. A snapshot taken during the open run has no place in cortexq.
func (im *importer) importSnapshots(ctx context.Context, dst pgx.Tx, c *corpus, s *service, runs []*cortexRun, sum *CorpusSummary) error {
	if len(runs) == 0 {
		return nil
	}
	scope := " t.corpus_id = " + strconv.Itoa(int(c.cortexID)) + " AND t.service_id = " + strconv.Itoa(int(s.cortexID))
	rows, err := im.src.Query(ctx, `SELECT DISTINCT h.saved_at AT TIME ZONE 'UTC', h.saved_at::text
		FROM historical_tasks h JOIN tasks t ON t.id = h.task_id WHERE`+scope+` ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("corpus %s: snapshots: %w", c.name, err)
	}
	taken := map[*cortexRun]string{}
	for rows.Next() {
		var at time.Time
		var literal string
		if err := rows.Scan(&at, &literal); err != nil {
			return fmt.Errorf("corpus %s: snapshots: %w", c.name, err)
		}
		if r := newestBefore(runs, at); r != nil && r.end != nil && r.id != 0 {
			taken[r] = literal // the last one wins
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("corpus %s: snapshots: %w", c.name, err)
	}
	for _, r := range runs {
		if lit, ok := taken[r]; ok {
			if err := im.copySnapshot(ctx, dst, c, r, scope, lit, sum); err != nil {
				return err
			}
		}
	}
	return nil
}

// newestBefore is the run that started last at or before at.
func newestBefore(runs []*cortexRun, at time.Time) *cortexRun {
	var out *cortexRun
	for _, r := range runs {
		if !r.start.After(at) {
			out = r
		}
	}
	return out
}

// copySnapshot copies one snapshot into run_statuses of run r, if it has none yet.
func (im *importer) copySnapshot(ctx context.Context, dst pgx.Tx, c *corpus, r *cortexRun, scope, savedAt string, sum *CorpusSummary) error {
	var has bool
	if err := dst.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM run_statuses WHERE run_id = $1)`, r.id).Scan(&has); err != nil || has {
		return wrapRun(c, r, err)
	}
	if _, err := dst.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS stage_snap (cortex_task bigint, status int) ON COMMIT DROP;
		TRUNCATE stage_snap`); err != nil {
		return wrapRun(c, r, err)
	}
	if _, err := pipe(ctx, im.src, dst, `SELECT h.task_id, h.status FROM historical_tasks h JOIN tasks t ON t.id = h.task_id
		WHERE h.saved_at = `+quoteLiteral(savedAt)+`::timestamp AND`+scope, "stage_snap"); err != nil {
		return wrapRun(c, r, err)
	}
	tag, err := dst.Exec(ctx, `INSERT INTO run_statuses (run_id, task_id, status)
		SELECT $1, i.task_id, (`+mappedStatus("h.status")+`)::smallint FROM stage_snap h JOIN idmap i ON i.cortex_id = h.cortex_task
		ON CONFLICT DO NOTHING`, r.id)
	if err != nil {
		return wrapRun(c, r, err)
	}
	sum.Snapshots += tag.RowsAffected()
	return nil
}
