package cortex

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// logTables are CorTeX's message tables, one a severity, in the order a task's log lists them.
var logTables = []struct{ table, severity string }{
	{"log_fatals", "fatal"}, {"log_errors", "error"}, {"log_warnings", "warning"},
	{"log_invalids", "invalid"}, {"log_infos", "info"},
}

// idListMax is the most tasks whose messages are asked for by id; for more, the messages of
// the corpus's finished tasks are read a range of CorTeX task ids at a time (messageChunk), and
// those of tasks not being imported are dropped on cortexq's side.
const idListMax = 20000

// messageChunk is the finished tasks being imported whose messages a range holds: the messages
// of one range are read, gathered into logs and written before the next range is read, so the
// temp table holds a range's (about 500,000 messages at CorTeX's usual 20 a task) and its sort
// stays in work_mem, whatever the corpus's size.
const messageChunk = 25000

// chunking is an idListMax and messageChunk of another size (zero: those), for a test's
// corpora of a few tasks to be read in several ranges.
type chunking struct{ listMax, chunk int }

// msgScope is the tasks of one read of messages: those of ids, or else those whose CorTeX id is
// at least lo and below hi (0: no bound).
type msgScope struct {
	ids    []int64
	lo, hi int64
}

// messagesQuery reads the messages of a corpus's finished tasks in scope: task, severity's
// position in logTables, id, category, what, details.
func messagesQuery(corpusID int32, scope msgScope) string {
	where := " WHERE t.corpus_id = " + strconv.Itoa(int(corpusID)) + " AND t.status BETWEEN -5 AND -1"
	if len(scope.ids) > 0 {
		var b strings.Builder
		for i, id := range scope.ids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(id, 10))
		}
		where += " AND m.task_id = ANY('{" + b.String() + "}'::bigint[]) AND t.id = ANY('{" + b.String() + "}'::bigint[])"
	}
	// The range on both sides of the join: PostgreSQL carries an equality across a join, not
	// a range, and without it each range would scan and hash every task of the corpus.
	if scope.lo != 0 {
		where += " AND m.task_id >= " + strconv.FormatInt(scope.lo, 10) + " AND t.id >= " + strconv.FormatInt(scope.lo, 10)
	}
	if scope.hi != 0 {
		where += " AND m.task_id < " + strconv.FormatInt(scope.hi, 10) + " AND t.id < " + strconv.FormatInt(scope.hi, 10)
	}
	parts := make([]string, len(logTables))
	for i, l := range logTables {
		// Cast to stage_msgs' types: the rows go in binary, which takes each column's own type.
		parts[i] = "SELECT m.task_id::bigint, " + strconv.Itoa(i) + "::smallint, m.id::bigint, " +
			"left(coalesce(m.category, ''), 100)::text, left(coalesce(m.what, ''), 200)::text, " +
			"coalesce(m.details, '')::text FROM " + l.table +
			" m JOIN tasks t ON t.id = m.task_id" + where
	}
	return strings.Join(parts, " UNION ALL ")
}

// severityCase is SQL naming the severity of a logTables position in column c.
func severityCase(c string) string {
	s := "CASE " + c
	for i, l := range logTables {
		s += " WHEN " + strconv.Itoa(i) + " THEN '" + l.severity + "'"
	}
	return s + " END"
}

// writeMessages brings the messages of the corpus's added and updated finished tasks into their
// logs (task_message_logs, one row a task, kinds in message_kinds), in logTables order then
// CorTeX's order, a scope (messageScopes) at a time.
func (im *importer) writeMessages(ctx context.Context, dst pgx.Tx, c *corpus, sum *CorpusSummary) error {
	scopes, err := messageScopes(ctx, dst, im.chunking)
	if err != nil || len(scopes) == 0 {
		return wrapMessages(c, "", err)
	}
	if _, err := dst.Exec(ctx, `CREATE TEMP TABLE stage_msgs (cortex_task bigint, sev smallint, id bigint,
		category text, what text, details text) ON COMMIT DROP`); err != nil {
		return wrapMessages(c, "", err)
	}
	for i, scope := range scopes {
		if _, err := dst.Exec(ctx, `TRUNCATE stage_msgs`); err != nil {
			return wrapMessages(c, "", err)
		}
		n, err := pipeBinary(ctx, im.src, dst, messagesQuery(c.cortexID, scope), "stage_msgs")
		if err != nil {
			return wrapMessages(c, "", err)
		}
		sum.Messages += n
		for _, step := range writeMessageSteps {
			if _, err := dst.Exec(ctx, step.sql); err != nil {
				return wrapMessages(c, step.what, err)
			}
		}
		im.step("corpus %s: messages, part %d of %d: %d read and written", c.name, i+1, len(scopes), n)
	}
	im.progress("corpus %s: read and wrote %d messages", c.name, sum.Messages)
	return nil
}

func wrapMessages(c *corpus, step string, err error) error {
	switch {
	case err == nil:
		return nil
	case step != "":
		return fmt.Errorf("corpus %s: messages (%s): %w", c.name, step, err)
	}
	return fmt.Errorf("corpus %s: messages: %w", c.name, err)
}

// messageScopes splits the finished tasks being imported (fresh and finished in idmap) into the
// scopes of messagesQuery: one list of ids for up to idListMax of them, else ranges of CorTeX
// ids of messageChunk of them each.
func messageScopes(ctx context.Context, dst pgx.Tx, sizes chunking) ([]msgScope, error) {
	listMax, chunk := sizes.listMax, sizes.chunk
	if listMax == 0 {
		listMax, chunk = idListMax, messageChunk
	}
	rows, err := dst.Query(ctx, `SELECT i.cortex_id FROM fresh f JOIN idmap i USING (task_id)
		WHERE i.status BETWEEN -5 AND -1 ORDER BY 1 LIMIT $1`, listMax+1)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	switch {
	case err != nil || len(ids) == 0:
		return nil, err
	case len(ids) <= listMax:
		return []msgScope{{ids: ids}}, nil
	}
	rows, err = dst.Query(ctx, `SELECT cortex_id FROM (
			SELECT i.cortex_id, row_number() OVER (ORDER BY i.cortex_id) AS n
			FROM fresh f JOIN idmap i USING (task_id) WHERE i.status BETWEEN -5 AND -1) x
		WHERE n % $1 = 1 ORDER BY 1`, chunk)
	if err != nil {
		return nil, err
	}
	lows, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	scopes := make([]msgScope, len(lows))
	for i, lo := range lows {
		scopes[i].lo = lo
		if i+1 < len(lows) {
			scopes[i].hi = lows[i+1]
		}
	}
	return scopes, nil
}

// The statements of writeMessages once stage_msgs holds the messages read. The kinds are looked
// up once each (kmap), and the messages are gathered into one log a CorTeX task before that is
// joined to the tasks: a join of a few rows a task, not of every message.
var writeMessageSteps = []struct{ what, sql string }{
	{"analyze", `ANALYZE stage_msgs`},
	{"kinds", `DROP TABLE IF EXISTS kseen, kmap;
		CREATE TEMP TABLE kseen ON COMMIT DROP AS
		SELECT DISTINCT sev, ` + severityCase("sev") + ` AS severity, category, what FROM stage_msgs`},
	{"add kinds", `INSERT INTO message_kinds (severity, category, what)
		SELECT severity, category, what FROM kseen
		ON CONFLICT ON CONSTRAINT message_kinds_key DO NOTHING`},
	{"map kinds", `CREATE TEMP TABLE kmap ON COMMIT DROP AS
		SELECT k.id, s.sev, s.category, s.what FROM kseen s
		JOIN message_kinds k ON k.severity = s.severity AND k.category = s.category AND k.what = s.what`},
	{"analyze kinds", `ANALYZE kmap`},
	{"logs", `INSERT INTO task_message_logs (task_id, run, kinds, details)
		SELECT t.id, t.run, a.kinds, a.details
		FROM (SELECT m.cortex_task, array_agg(k.id ORDER BY m.sev, m.id) AS kinds,
		             CASE WHEN bool_or(m.details <> '') THEN array_agg(m.details ORDER BY m.sev, m.id) END AS details
		      FROM stage_msgs m JOIN kmap k ON k.sev = m.sev AND k.category = m.category AND k.what = m.what
		      GROUP BY m.cortex_task) a
		JOIN idmap i ON i.cortex_id = a.cortex_task
		JOIN fresh f ON f.task_id = i.task_id
		JOIN tasks t ON t.id = i.task_id AND t.status BETWEEN -5 AND -1
		ON CONFLICT (task_id, run) DO NOTHING`},
}
