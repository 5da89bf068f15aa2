package cortex

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// CorpusSummary is what an import did to one corpus.
type CorpusSummary struct {
	Corpus    string
	Entries   int64 // entries read (tasks of CorTeX's import service)
	Tasks     int64 // tasks read
	Added     int64 // tasks added
	Updated   int64 // tasks that took CorTeX's new status
	Messages  int64 // messages read for the added and updated tasks
	Runs      int64 // runs added
	Snapshots int64 // task statuses of closed runs added
}

// mappedStatus is CorTeX's status as cortexq's (SQL over column s): leased (above 0) is TODO,
// blocked (below -5) is cortexq's blocked; the rest are the same numbers.
func mappedStatus(s string) string {
	return "CASE WHEN " + s + " > 0 THEN 0 WHEN " + s + " < -5 THEN -6 ELSE " + s + " END"
}

// importMemory is what a corpus's transaction may use for each sort and hash (the messages of a
// million tasks are sorted by task) and to build the indexes of its temp tables; SET LOCAL: the
// transaction's own, its connection goes back to the pool as it was.
const importMemory = `SET LOCAL work_mem = '256MB'; SET LOCAL maintenance_work_mem = '256MB'`

// importCorpus brings one corpus's entries, tasks, messages and runs in one transaction on
// cortexq's side.
func (im *importer) importCorpus(ctx context.Context, c *corpus) (CorpusSummary, error) {
	sum := CorpusSummary{Corpus: c.name}
	err := im.inDst(ctx, func(dst pgx.Tx) error {
		if _, err := dst.Exec(ctx, importMemory); err != nil {
			return fmt.Errorf("corpus %s: %w", c.name, err)
		}
		if err := im.stageTasks(ctx, dst, c, &sum); err != nil {
			return err
		}
		if err := im.writeTasks(ctx, dst, c, &sum); err != nil {
			return err
		}
		if err := im.writeMessages(ctx, dst, c, &sum); err != nil {
			return err
		}
		return im.importRuns(ctx, dst, c, &sum)
	})
	return sum, err
}

// stageTasks copies the corpus's CorTeX tasks into the temp table stage_tasks, and the services'
// ids into svcmap.
func (im *importer) stageTasks(ctx context.Context, dst pgx.Tx, c *corpus, sum *CorpusSummary) error {
	cortexIDs, ids := im.reg.serviceMap()
	if _, err := dst.Exec(ctx, `CREATE TEMP TABLE svcmap ON COMMIT DROP AS
		SELECT unnest($1::int[]) AS cortex_id, unnest($2::int[]) AS service_id`, cortexIDs, ids); err != nil {
		return fmt.Errorf("corpus %s: %w", c.name, err)
	}
	if _, err := dst.Exec(ctx, `CREATE TEMP TABLE stage_tasks (cortex_id bigint, service_id int, status int,
		entry text, runtime_ms int) ON COMMIT DROP`); err != nil {
		return fmt.Errorf("corpus %s: %w", c.name, err)
	}
	runtime := "NULL::int"
	from := "tasks t"
	if im.shape.runtimes {
		runtime, from = "r.runtime_ms::int", "tasks t LEFT JOIN task_runtimes r ON r.task_id = t.id"
	}
	// Cast to stage_tasks' types: the rows go in binary.
	n, err := pipeBinary(ctx, im.src, dst, "SELECT t.id::bigint, t.service_id::int, t.status::int, t.entry::text, "+runtime+" FROM "+from+
		" WHERE t.corpus_id = "+strconv.Itoa(int(c.cortexID)), "stage_tasks")
	if err != nil {
		return fmt.Errorf("corpus %s: tasks: %w", c.name, err)
	}
	im.progress("corpus %s: read %d tasks (entries included)", c.name, n)
	return nil
}

// The statements of writeTasks, in order; $1 is the corpus, $2 CorTeX's import service.
var writeTaskSteps = []struct{ what, sql string }{
	{"entries", `INSERT INTO corpus_entries (corpus_id, entry)
		SELECT $1::int, e FROM (SELECT btrim(entry, E' \t\r\n') AS e FROM stage_tasks WHERE service_id = $2::int) x
		WHERE e <> '' ORDER BY e ON CONFLICT DO NOTHING`}, // in the key's order: twice as fast as not
	{"stage", `CREATE TEMP TABLE staged ON COMMIT DROP AS
		SELECT s.cortex_id, m.service_id, btrim(s.entry, E' \t\r\n') AS entry, s.status AS cortex_status,
		       (` + mappedStatus("s.status") + `)::smallint AS status, s.runtime_ms
		FROM stage_tasks s JOIN svcmap m ON m.cortex_id = s.service_id
		WHERE btrim(s.entry, E' \t\r\n') <> ''`},
	{"analyze", `ANALYZE staged`},
	{"fresh", `CREATE TEMP TABLE fresh (task_id bigint PRIMARY KEY, updated bool) ON COMMIT DROP`},
	{"add", `WITH ins AS (
			INSERT INTO tasks (service_id, corpus_id, entry, status)
			SELECT service_id, $1::int, entry, status FROM staged ORDER BY service_id, entry, cortex_id
			ON CONFLICT (corpus_id, service_id, entry) DO NOTHING
			RETURNING id)
		INSERT INTO fresh (task_id, updated) SELECT id, false FROM ins`},
	{"map", `CREATE TEMP TABLE idmap ON COMMIT DROP AS
		SELECT DISTINCT ON (t.id) s.cortex_id, t.id AS task_id, s.cortex_status, s.status, s.runtime_ms
		FROM staged s JOIN tasks t ON t.corpus_id = $1::int AND t.service_id = s.service_id AND t.entry = s.entry
		ORDER BY t.id, s.cortex_id`},
	{"index", `CREATE INDEX ON idmap (cortex_id)`},
	{"analyze map", `ANALYZE idmap`},
	{"record", `INSERT INTO cortex_tasks (task_id, cortex_id, cortex_status, runtime_ms)
		SELECT i.task_id, i.cortex_id, i.cortex_status, i.runtime_ms FROM idmap i JOIN fresh f USING (task_id)`},
	// A task imported before whose CorTeX status moved on, and which cortexq left as it was
	// imported (its status, no lease): it takes the new status, and its messages again.
	{"update", `WITH moved AS (
			SELECT i.task_id, i.cortex_status, i.status FROM idmap i
			JOIN cortex_tasks c ON c.task_id = i.task_id
			JOIN tasks t ON t.id = i.task_id
			WHERE c.cortex_status <> i.cortex_status
			  AND t.status = ` + mappedStatus("c.cortex_status") + `
			  AND NOT EXISTS (SELECT 1 FROM dispatch d WHERE d.task_id = t.id)),
		rec AS (
			UPDATE cortex_tasks c SET cortex_status = m.cortex_status FROM moved m WHERE c.task_id = m.task_id),
		logs AS (
			DELETE FROM task_message_logs l USING moved m, tasks t
			WHERE l.task_id = m.task_id AND t.id = m.task_id AND l.run = t.run),
		upd AS (
			UPDATE tasks t SET status = m.status,
			       todo_since = CASE WHEN m.status = 0 THEN now() ELSE t.todo_since END
			FROM moved m WHERE t.id = m.task_id RETURNING t.id)
		INSERT INTO fresh (task_id, updated) SELECT id, true FROM upd`},
	{"runtimes", `UPDATE cortex_tasks c SET runtime_ms = i.runtime_ms FROM idmap i
		WHERE c.task_id = i.task_id AND c.runtime_ms IS DISTINCT FROM i.runtime_ms`},
	{"report", `INSERT INTO report_changes (task_id) SELECT task_id FROM fresh`},
}

// writeTasks adds the corpus's entries and tasks, records the CorTeX ids, and updates the tasks
// imported before whose CorTeX status moved on (writeTaskSteps).
func (im *importer) writeTasks(ctx context.Context, dst pgx.Tx, c *corpus, sum *CorpusSummary) error {
	var deferred []string // indexes built after the tasks are added (deferIndexes)
	for _, step := range writeTaskSteps {
		args := []any{c.id, im.reg.importID}
		if !strings.Contains(step.sql, "$2") {
			args = args[:1]
		}
		if !strings.Contains(step.sql, "$1") {
			args = nil
		}
		var err error
		if step.what == "add" {
			if deferred, err = deferIndexes(ctx, dst); err != nil {
				return fmt.Errorf("corpus %s: %w", c.name, err)
			}
		}
		if _, err := dst.Exec(ctx, step.sql, args...); err != nil {
			return fmt.Errorf("corpus %s: tasks (%s): %w", c.name, step.what, err)
		}
		im.step("corpus %s: tasks (%s)", c.name, step.what)
		if step.what == "add" && len(deferred) > 0 {
			if err := rebuildIndexes(ctx, dst, deferred); err != nil {
				return fmt.Errorf("corpus %s: %w", c.name, err)
			}
			im.step("corpus %s: tasks (%d indexes built after them)", c.name, len(deferred))
		}
	}
	if err := dst.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM stage_tasks WHERE service_id = $1::int),
			(SELECT count(*) FROM staged),
			(SELECT count(*) FROM fresh WHERE NOT updated),
			(SELECT count(*) FROM fresh WHERE updated)`, im.reg.importID).
		Scan(&sum.Entries, &sum.Tasks, &sum.Added, &sum.Updated); err != nil {
		return fmt.Errorf("corpus %s: %w", c.name, err)
	}
	im.progress("corpus %s: %d entries, %d tasks: %d added, %d updated", c.name, sum.Entries, sum.Tasks, sum.Added, sum.Updated)
	return nil
}
