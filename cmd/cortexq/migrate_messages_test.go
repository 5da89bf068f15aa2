package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrationCompactsMessages: 00015 converts the messages of a database in place, from a row
// a message to a log row per task and run; the task_messages view then shows every message with
// its columns as they were (id: its position in its task's log of that run), and rolling back
// gives the table back.
func TestMigrationCompactsMessages(t *testing.T) {
	d := newTestDB(t)
	d.ok("migrate", "down", "14")
	var svc, corpus int32
	require.NoError(t, d.pool.QueryRow(d.ctx, `INSERT INTO services (name) VALUES ('echo') RETURNING id`).Scan(&svc))
	require.NoError(t, d.pool.QueryRow(d.ctx, `INSERT INTO corpora (name, path) VALUES ('c', '/c') RETURNING id`).Scan(&corpus))
	_, err := d.pool.Exec(d.ctx, `INSERT INTO tasks (corpus_id, service_id, entry, status, run)
		SELECT $1, $2, '/c/' || g || '.zip', -3, 2 FROM generate_series(1, 40) AS g`, corpus, svc)
	require.NoError(t, err)
	// Messages of two runs, interleaved between tasks as claims write them: details empty for
	// some logs, for some messages, or none; a what of many bytes; a task without messages.
	_, err = d.pool.Exec(d.ctx, `
		INSERT INTO task_messages (task_id, run, severity, category, what, details)
		SELECT t.id, r.run, s.severity, 'cat' || (m.k % 3), 'what_' || (m.k % 5) || '_é∑',
		       CASE WHEN t.id % 4 = 0 THEN '' WHEN m.k % 2 = 0 THEN '' ELSE 'details ' || t.id || '/' || m.k || E'\n\tmore' END
		FROM generate_series(1, 12) AS m (k)
		CROSS JOIN (SELECT id FROM tasks WHERE id % 10 <> 7) AS t
		CROSS JOIN (VALUES (1), (2)) AS r (run)
		CROSS JOIN LATERAL (SELECT (ARRAY['info', 'warning', 'error', 'fatal', 'invalid'])[1 + (t.id + m.k) % 5] AS severity) AS s
		ORDER BY m.k, t.id, r.run`)
	require.NoError(t, err)
	type message struct {
		Task                              int64
		Run                               int32
		Severity, Category, What, Details string
	}
	read := func() []message {
		t.Helper()
		rows, err := d.pool.Query(d.ctx, `SELECT task_id, run, severity, category::text, what::text, details::text
			FROM task_messages ORDER BY task_id, run, id`)
		require.NoError(t, err)
		var out []message
		for rows.Next() {
			var m message
			require.NoError(t, rows.Scan(&m.Task, &m.Run, &m.Severity, &m.Category, &m.What, &m.Details))
			out = append(out, m)
		}
		require.NoError(t, rows.Err())
		return out
	}
	before := read()
	require.Len(t, before, 36*12*2)

	d.ok("migrate", "up")
	require.Equal(t, before, read())
	require.Equal(t, 36*2, d.count(`SELECT count(*) FROM task_message_logs`), "a row per task and run")
	require.Equal(t, d.count(`SELECT count(DISTINCT (severity, category, what)) FROM task_messages`), d.count(`SELECT count(*) FROM message_kinds`),
		"each (severity, category, what) once")
	require.Equal(t, 10*2, d.count(`SELECT count(*) FROM task_message_logs WHERE details IS NULL`), "no details kept for logs without any")
	// Ids are positions in the task's log of a run; a task's query reads its own rows.
	require.Equal(t, 12, d.count(`SELECT max(id) FROM task_messages WHERE task_id = 1 AND run = 2`))
	// Rows inserted into the view join their task's log.
	_, err = d.pool.Exec(d.ctx, `INSERT INTO task_messages (task_id, run, severity, category, what, details)
		VALUES (7, 2, 'error', 'late', 'one', 'x'), (7, 2, 'error', 'late', 'two', '')`)
	require.NoError(t, err)
	require.Equal(t, 2, d.count(`SELECT max(id) FROM task_messages WHERE task_id = 7`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM task_messages WHERE task_id = 7 AND details = 'x' AND id = 1`))

	_, err = d.pool.Exec(d.ctx, `DELETE FROM task_message_logs WHERE task_id = 7`)
	require.NoError(t, err)

	d.ok("migrate", "down", "14")
	require.Equal(t, before, read(), "rolled back")
	var kind string
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT table_type::text FROM information_schema.tables WHERE table_name = 'task_messages'`).Scan(&kind))
	require.Equal(t, "BASE TABLE", kind)
}

// TestMigrationFoldedKindsOnly: 00023 drops report_folded's entries of the status's severity
// (the fold derives them from the kinds it keeps); rolling back writes them again from the kinds,
// as the fold before 00023 wrote them, and the rollups stay as they were through both.
func TestMigrationFoldedKindsOnly(t *testing.T) {
	d := newTestDB(t)
	var svc, corpus int32
	require.NoError(t, d.pool.QueryRow(d.ctx, `INSERT INTO services (name) VALUES ('echo') RETURNING id`).Scan(&svc))
	require.NoError(t, d.pool.QueryRow(d.ctx, `INSERT INTO corpora (name, path) VALUES ('c', '/c') RETURNING id`).Scan(&corpus))
	// 30 tasks of every final status, with 12 messages of every severity (two runs: the current
	// one is 2), some without messages.
	_, err := d.pool.Exec(d.ctx, `INSERT INTO tasks (corpus_id, service_id, entry, status, run)
		SELECT $1, $2, '/c/' || g || '.zip', -1 - g % 5, 2 FROM generate_series(1, 30) AS g`, corpus, svc)
	require.NoError(t, err)
	_, err = d.pool.Exec(d.ctx, `
		INSERT INTO task_messages (task_id, run, severity, category, what, details)
		SELECT t.id, r.run, (ARRAY['info', 'warning', 'error', 'fatal', 'invalid'])[1 + (t.id * r.run + m.k) % 5],
		       'cat' || (m.k % 3), 'what_' || (m.k % 4), ''
		FROM generate_series(1, 12) AS m (k)
		CROSS JOIN (SELECT id FROM tasks WHERE id % 7 <> 3) AS t
		CROSS JOIN (VALUES (1), (2)) AS r (run)
		ORDER BY t.id, r.run, m.k`)
	require.NoError(t, err)
	// Written this way, nothing noted the tasks for the fold (a claim would have).
	_, err = d.pool.Exec(d.ctx, `INSERT INTO report_changes SELECT id FROM tasks`)
	require.NoError(t, err)
	d.ok("fold")
	rollups := func() string {
		var s string
		require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT string_agg(x, ';' ORDER BY x) FROM (
			SELECT r::text AS x FROM report_rollup r UNION ALL SELECT a::text FROM report_all_rollup a) s`).Scan(&s))
		return s
	}
	before := rollups()
	require.NotEmpty(t, before)

	d.ok("migrate", "down", "22")
	// Each task's entries of its status's severity in its current run, counted from the log.
	want := func() string {
		var s string
		require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT string_agg(format('%s:%s:%s:%s', id, c, w, m), ';' ORDER BY id) FROM (
			SELECT e.task_id AS id, array_agg(e.category ORDER BY e.category, e.what) AS c,
			       array_agg(e.what ORDER BY e.category, e.what) AS w, array_agg(e.n ORDER BY e.category, e.what) AS m
			FROM (SELECT m.task_id, m.category::text, m.what::text, count(*)::int AS n
			      FROM task_messages m JOIN tasks t ON t.id = m.task_id AND t.run = m.run
			      WHERE m.severity = status_severity(t.status)
			      GROUP BY 1, 2, 3) e
			GROUP BY e.task_id) s`).Scan(&s))
		return s
	}()
	var got string
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT string_agg(format('%s:%s:%s:%s', task_id, categories, whats, messages), ';' ORDER BY task_id)
		FROM report_folded WHERE messages <> '{}'`).Scan(&got))
	require.Equal(t, want, got)
	require.Equal(t, 0, d.count(`SELECT count(*) FROM report_folded f JOIN tasks t ON t.id = f.task_id
		WHERE f.messages = '{}' AND EXISTS (SELECT 1 FROM task_messages m WHERE m.task_id = t.id AND m.run = t.run AND m.severity = status_severity(t.status))`))

	d.ok("migrate", "up")
	require.Equal(t, before, rollups())
	// A refold of every task after the round trip changes nothing.
	_, err = d.pool.Exec(d.ctx, `INSERT INTO report_changes SELECT id FROM tasks`)
	require.NoError(t, err)
	d.ok("fold")
	require.Equal(t, before, rollups())
}

// TestMigrationUsualDetails: rolling 00025 back writes out the details each NULL element stood
// for (its kind's usual ones), so the code before it reads every message as it was; migrating up
// again changes nothing a reader sees.
func TestMigrationUsualDetails(t *testing.T) {
	d := newTestDB(t)
	var svc, corpus int32
	require.NoError(t, d.pool.QueryRow(d.ctx, `INSERT INTO services (name) VALUES ('echo') RETURNING id`).Scan(&svc))
	require.NoError(t, d.pool.QueryRow(d.ctx, `INSERT INTO corpora (name, path) VALUES ('c', '/c') RETURNING id`).Scan(&corpus))
	_, err := d.pool.Exec(d.ctx, `INSERT INTO tasks (corpus_id, service_id, entry, status, run)
		SELECT $1, $2, '/c/' || g || '.zip', -1, 1 FROM generate_series(1, 5) AS g`, corpus, svc)
	require.NoError(t, err)
	_, err = d.pool.Exec(d.ctx, `
		INSERT INTO message_kinds (id, severity, category, what, usual_details) OVERRIDING SYSTEM VALUE VALUES
			(901, 'info', 'loaded_file', 'a', '/p/a'), (902, 'info', 'loaded_file', 'b', NULL),
			(903, 'warning', 'undefined', 'c', 'at line 1');
		INSERT INTO task_message_logs (task_id, run, kinds, details)
		SELECT id, 1, k, dt FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM tasks) t
		JOIN (VALUES (1, '{901,902,903,901}'::int[], '{NULL,x,NULL,/q/a}'::text[]),
		             (2, '{901,901}', '{NULL,NULL}'),
		             (3, '{902,903}', NULL),
		             (4, '{901,903}', '{/p/a,""}'),
		             (5, '{901,902}', '{NULL}')) AS v (n, k, dt) ON v.n = t.n`)
	require.NoError(t, err)
	read := func() string {
		var s string
		require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT string_agg(format('%s/%s:%s', task_id, id, details), ';' ORDER BY task_id, id)
			FROM task_messages`).Scan(&s))
		return s
	}
	before := read()
	require.Equal(t, 12, strings.Count(before, ";")+1)
	require.Contains(t, before, "/1:/p/a;")
	require.Contains(t, before, "/3:at line 1;")
	require.Contains(t, before, "/2:;") // kind b has no usual details

	d.ok("migrate", "down", "24")
	require.Equal(t, before, read())
	require.Equal(t, 0, d.count(`SELECT count(*) FROM task_message_logs
		WHERE array_position(details, NULL) IS NOT NULL OR cardinality(details) < cardinality(kinds)`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM task_message_logs WHERE details IS NULL`))

	d.ok("migrate", "up")
	require.Equal(t, before, read())
}
