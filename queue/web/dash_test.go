package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/web"
)

// TestWebSearch finds a task by id (a redirect to it) and by a piece of its entry, through the
// trigram index; the navigation holds the search box and the task lists link each row's
// source, result and preview (docs/web.md#search).
func TestWebSearch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	r := c.get("/search?q=" + strconv.FormatInt(f.bad, 10))
	require.Equal(t, http.StatusSeeOther, r.code, r.body)
	require.Equal(t, fmt.Sprintf("/task/%d", f.bad), r.header.Get("Location"))
	r = c.get("/search?q=" + url.QueryEscape(" #"+strconv.FormatInt(f.warn, 10)))
	require.Equal(t, fmt.Sprintf("/task/%d", f.warn), r.header.Get("Location"))

	r = c.get("/search?q=" + url.QueryEscape("BAD/source"))
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, fmt.Sprintf(`<a href="/task/%d">%d</a>`, f.bad, f.bad))
	require.NotContains(t, r.body, fmt.Sprintf(`<a href="/task/%d">`, f.ok))
	require.Contains(t, r.body, "1 task whose entry holds")
	require.Contains(t, r.body, fmt.Sprintf(`href="/task/%d/source"`, f.bad))
	require.Contains(t, r.body, fmt.Sprintf(`href="/task/%d/view"`, f.bad))

	r = c.get("/search?q=source.zip")
	require.Contains(t, r.body, "4 tasks whose entry holds")
	// LIKE's wildcards are literal: "%" matches no entry.
	r = c.get("/search?q=" + url.QueryEscape("%%%"))
	require.Contains(t, r.body, "0 tasks whose entry holds")
	r = c.get("/search?q=ok")
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.body, "at least 3 characters")
	// A number that is no task's id is searched for in the entries.
	r = c.get("/search?q=999999")
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "0 tasks whose entry holds")

	require.Contains(t, c.get("/").body, `<form method="get" action="/search" class="search" role="search">`)
	msgs := c.get(pages(f)["what"]).body
	require.Contains(t, msgs, fmt.Sprintf(`href="/task/%d/result"`, f.bad))

	// The index answers the search (planner told to avoid reading the table).
	tx, err := f.pool.Begin(f.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(f.ctx) }()
	_, err = tx.Exec(f.ctx, `SET LOCAL enable_seqscan = off`)
	require.NoError(t, err)
	var plan strings.Builder
	rows, err := tx.Query(f.ctx, `EXPLAIN SELECT task_id FROM task_entries WHERE entry ILIKE '%2301.0001%'`)
	require.NoError(t, err)
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan.WriteString(line + "\n")
	}
	require.NoError(t, rows.Err())
	require.Contains(t, plan.String(), "task_entries_trgm")
	require.NoError(t, tx.Rollback(f.ctx))

	// task_entries follows tasks (migration 00022): a status change leaves it be, an entry's
	// change and a task's deletion reach it, and the search sees both.
	var entries, tasks int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT (SELECT count(*) FROM task_entries), (SELECT count(*) FROM tasks)`).Scan(&entries, &tasks))
	require.Equal(t, tasks, entries)
	_, err = f.pool.Exec(f.ctx, `UPDATE tasks SET entry = entry || '.renamed-for-search' WHERE id = $1`, f.bad)
	require.NoError(t, err)
	require.Contains(t, c.get("/search?q=renamed-for-search").body, "1 task whose entry holds")
	_, err = f.pool.Exec(f.ctx, `DELETE FROM tasks WHERE id = $1`, f.bad)
	require.NoError(t, err)
	require.Contains(t, c.get("/search?q=renamed-for-search").body, "0 tasks whose entry holds")
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT (SELECT count(*) FROM task_entries), (SELECT count(*) FROM tasks)`).Scan(&entries, &tasks))
	require.Equal(t, tasks, entries)
}

// TestWebLiveness: a worker that only asks (no lease for minutes) is active; one not heard from
// for 20 minutes is gone; a replica whose heartbeats stopped is gone; a paused corpus shows it
// and offers Resume only; the workers page shows rates over the last hour and links to a
// worker's attempts (docs/web.md#liveness).
func TestWebLiveness(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	f.exec(`INSERT INTO workers (name, service_id, first_seen, last_request, last_result, dispatched, results)
		VALUES ('poller', 1, now() - interval '2 hours', now() - interval '30 minutes', now() - interval '30 minutes', 3, 3),
		       ('vanished', 1, now() - interval '2 hours', now() - interval '20 minutes', now() - interval '20 minutes', 1, 1)`)
	// The poller asks for work and gets none: the replica notes it, and flushes it.
	f.store.NoteRequest(1, "poller")
	f.store.NoteRequest(1, "never-leased")
	require.NoError(t, f.store.FlushWorkers(f.ctx))
	var n int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM workers WHERE name = 'never-leased'`).Scan(&n))
	require.Zero(t, n, "a worker that never leased is not added by asking")
	c := f.client()
	w := c.get("/workers").body
	require.Regexp(t, `(?s)<tr class="w-active"><td class="entry"><a href="/workers/attempts\?worker=poller"[^>]*>poller</a>.*?state-active`, w)
	require.Regexp(t, `(?s)<tr class="w-gone"><td class="entry"><a href="/workers/attempts\?worker=vanished"`, w)
	require.Contains(t, w, "2 active")
	// Rates over the last hour: two answered attempts of the hostile worker, 2/60 a minute.
	require.Contains(t, w, "<td>2</td><td>0.0</td>")
	require.NotContains(t, w, "<td>52</td>", "the rates count the last hour only, not every attempt") // a cell, not a time that holds 52
	a := c.get("/workers/attempts?worker=" + url.QueryEscape("worker"+xssAttr))
	require.Equal(t, http.StatusOK, a.code)
	require.Contains(t, a.body, fmt.Sprintf(`<a href="/task/%d">`, f.bad))
	require.Contains(t, a.body, "2 attempts")

	// Replicas: r-up beats now, r-gone beat a minute ago, r-stopped said it stopped.
	require.NoError(t, f.store.Heartbeat(f.ctx, false))
	f.exec(`INSERT INTO replica_heartbeats (replica, started_at, seen_at, stopped) VALUES
		('r-gone', now() - interval '1 hour', now() - interval '1 minute', false),
		('r-stopped', now() - interval '1 hour', now() - interval '10 seconds', true)`)
	// (The overview reads the replicas once, then every 15 s: this is its first load.)
	over := c.get("/").body
	require.Contains(t, over, `data-live="active_workers">2</span> active workers`, "the overview counts the poller too")
	require.Contains(t, over, `<tr class="r-up"><td>r1</td>`)
	require.Contains(t, over, `<tr class="r-gone"><td>r-gone</td>`)
	require.Contains(t, over, `<tr class="r-stopped"><td>r-stopped</td>`)
	require.Contains(t, c.get("/live").body, `"Replica":"r-gone","State":"gone"`)

	// Paused: the row says so and offers Resume only; before, Pause only.
	c.login(token)
	over = c.get("/").body
	require.NotContains(t, over, `class="tag paused"`)
	require.Contains(t, over, `action="/pause"`)
	require.NotContains(t, over, `action="/resume"`)
	require.Equal(t, http.StatusOK, c.post("/pause", url.Values{"csrf": {c.csrf()}, "corpus": {"papers"}, "service": {"tex_to_html"}}).code)
	over = c.get("/").body
	require.Contains(t, over, `class="tag paused"`)
	require.Contains(t, over, `action="/resume"`)
	require.NotContains(t, over, `action="/pause"`)
}

// TestWebDeadLetters lists a dead-lettered task with its cause and a rerun button that reruns
// it alone, and a queued retry; the overview's counts link there.
func TestWebDeadLetters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	f.exec(`INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, answered_at, outcome, status) VALUES
		($1, 1, 1, 'w', 'r1', now() - interval '1 second', now(), 'dead_lettered', -4)`, f.bad)
	f.exec(`DELETE FROM attempts WHERE task_id = $1 AND outcome = 'accepted'`, f.bad)
	f.exec(`UPDATE tasks SET status = 1 WHERE id = $1`, f.todo)
	f.exec(`INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, queued, replica, service_id, retries,
		lease_timeout_seconds, leased_at, last_cause, forget_at)
		VALUES ($1, 1, 'settling', '{w}', now(), true, 'r1', 1, 2, 60, now() - interval '1 minute',
		'[{"severity":"error","category":"retry","what":"worker_crashed","details":""}]', now() + interval '1 hour')`, f.todo)
	c := f.client()
	over := c.get("/").body
	require.Contains(t, over, `<a href="/dead#dead" id="dead-link">`)
	require.Contains(t, over, `<a href="/dead#retries" id="retries-link"><span class="figure">1</span> queued retries</a>`)
	d := c.get("/dead")
	require.Equal(t, http.StatusOK, d.code, d.body)
	require.Contains(t, d.body, "1 task")
	require.Contains(t, d.body, fmt.Sprintf(`<a href="/task/%d">%d</a>`, f.bad, f.bad))
	require.Contains(t, d.body, "latex/what&lt;script&gt;", "the cause, escaped")
	require.Contains(t, d.body, fmt.Sprintf(`<a href="/task/%d">%d</a>`, f.todo, f.todo))
	require.Contains(t, d.body, "worker_crashed")
	require.NotContains(t, d.body, `action="/rerun-task"`, "no button signed out")

	c.login(token)
	d = c.get("/dead")
	require.Contains(t, d.body, `action="/rerun-task"`)
	// Without the CSRF token: refused.
	require.Equal(t, http.StatusForbidden, c.post("/rerun-task", url.Values{"task": {strconv.FormatInt(f.bad, 10)}}).code)
	r := c.post("/rerun-task", url.Values{"csrf": {c.csrf()}, "task": {strconv.FormatInt(f.bad, 10)}, "back": {"/dead"}})
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "1 task back to TODO")
	require.Equal(t, 0, f.status(f.bad))
	require.Equal(t, -2, f.status(f.warn), "the other tasks stay")
	require.Equal(t, -1, f.status(f.ok))
}

// TestWebTaskPageForErrors: messages worst first and coloured, infos folded with their count,
// details with their line breaks, "file; line N" linking to that line of the source file, a
// rerun button, "open the preview in its own tab", and why an Invalid task has no preview.
func TestWebTaskPageForErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	f.exec(`INSERT INTO task_messages (task_id, run, severity, category, what, details) VALUES
		($1, 1, 'info', 'loaded_file', 'a.sty', ''), ($1, 1, 'info', 'loaded_file', 'b.sty', ''),
		($1, 1, 'warning', 'missing_file', 'x', 'main.tex; line 1 col 3'),
		($1, 1, 'error', 'undefined', 'foo', E'first line\nsecond line')`, f.bad)
	c := f.client()
	body := c.get(fmt.Sprintf("/task/%d", f.bad)).body
	fatal := strings.Index(body, `<tr class="m-fatal">`)
	errRow := strings.Index(body, `<tr class="m-error">`)
	warn := strings.Index(body, `<tr class="m-warning">`)
	info := strings.Index(body, `<tr class="m-info">`)
	require.True(t, fatal > 0 && fatal < errRow && errRow < warn && warn < info, "worst first: %d %d %d %d", fatal, errRow, warn, info)
	require.Contains(t, body, `<details class="infos"><summary>2 infos</summary>`)
	require.Less(t, strings.Index(body, `<details class="infos">`), info, "the infos folded")
	require.Contains(t, body, "first line\nsecond line")
	link := fmt.Sprintf(`/task/%d/file?name=main.tex#L1`, f.bad)
	require.Contains(t, body, `href="`+link+`"`)
	file := c.get(strings.TrimSuffix(link, "#L1"))
	require.Equal(t, http.StatusOK, file.code, file.body)
	require.Contains(t, file.body, `<tr id="L1"><td class="ln"><a href="#L1">1</a></td><td class="code">\documentclass{article} bad</td></tr>`)
	require.Equal(t, http.StatusNotFound, c.get(fmt.Sprintf("/task/%d/file?name=nothere.tex", f.bad)).code)
	css := c.get("/static/style.css").body
	require.NotContains(t, css, "break-all")
	require.Contains(t, css, ".details { white-space: pre-wrap; }")

	ok := c.get(fmt.Sprintf("/task/%d", f.ok)).body
	require.Contains(t, ok, fmt.Sprintf(`<a href="/task/%d/view" target="_blank" rel="noopener" id="open-preview">`, f.ok))
	v := c.get(fmt.Sprintf("/task/%d/view", f.ok))
	require.Equal(t, http.StatusOK, v.code)
	require.Contains(t, v.body, `<iframe class="preview full" sandbox="allow-scripts" src="/task/`)

	f.exec(`UPDATE tasks SET status = -5 WHERE id = $1`, f.warn)
	inv := c.get(fmt.Sprintf("/task/%d", f.warn)).body
	require.Contains(t, inv, `id="no-preview">no preview: the task is Invalid`)
	require.Equal(t, http.StatusNotFound, c.get(fmt.Sprintf("/task/%d/view", f.warn)).code)

	require.NotContains(t, body, `action="/rerun-task"`)
	c.login(token)
	body = c.get(fmt.Sprintf("/task/%d", f.bad)).body
	require.Contains(t, body, `<form method="post" action="/rerun-task" class="inline"><input type="hidden" name="csrf"`)
}

// TestWebHistory: the overview's throughput charts have axes (tasks/min, time ago) over the
// last hour and day; the runs chart is wide enough to read; the task page numbers runs as the
// runs page does; counts of one are singular.
func TestWebHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	c := f.client()
	over := c.get("/").body
	require.Contains(t, over, `aria-label="Last hour: tasks answered per minute"`)
	require.Contains(t, over, `aria-label="Last day: tasks answered per minute"`)
	require.Contains(t, over, "Last hour: 2 tasks answered, at most 2.0/min")
	require.Contains(t, over, `text-anchor="end">2/min</text>`, "the y axis")
	require.Contains(t, over, `text-anchor="middle">-45m</text>`, "the x axis of the hour")
	require.Contains(t, over, `text-anchor="middle">-6h</text>`, "the x axis of the day")
	require.Contains(t, over, `text-anchor="middle">now</text>`)

	_, err := f.store.Rerun(f.ctx, lease.RerunScope{CorpusID: 1, ServiceID: 1, Severity: "fatal"})
	require.NoError(t, err)
	var open int64
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT max(id) FROM runs`).Scan(&open))
	runs := c.get("/runs?corpus=papers&service=tex_to_html").body
	require.Regexp(t, `<svg class="chart" width="(6[4-9]\d|[7-9]\d\d|\d{4})"`, runs, "at least 640 px wide")
	require.Contains(t, runs, fmt.Sprintf("<tr><td>#%d</td>", open))
	task := c.get(fmt.Sprintf("/task/%d", f.bad)).body
	require.Contains(t, task, fmt.Sprintf(`">#%d</a> of papers / tex_to_html; the task's 2nd run (rerun 1 time)`, open))
	// Its attempt (of the first run) is numbered as the runs page numbers that run.
	require.Contains(t, task, fmt.Sprintf("<tr><td>#%d</td><td>0</td>", open-1))
	require.Contains(t, task, fmt.Sprintf("run #%d attempt 0: accepted", open-1))

	rep := c.get("/report?corpus=papers&service=tex_to_html&severity=warning").body
	require.Contains(t, rep, "4 tasks, 4 of them not Invalid")
	require.Contains(t, rep, "1 row in all")
}

// TestWebReportAllTasks: the all-tasks view counts a severity's messages in every task whatever
// its status (the warnings inside a Fatal task, infos anywhere), with share bars and message
// counts at the top; by status, the same warning counts only in Warning tasks. Its rerun button
// reruns the tasks of any status with such a message.
func TestWebReportAllTasks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{AdminToken: token})
	f.exec(`INSERT INTO task_messages (task_id, run, severity, category, what, details) VALUES
		($1, 1, 'warning', 'missing_file', 'foo.sty', 'in the fatal task'),
		($1, 1, 'error', 'undefined', '\foo', ''), ($1, 1, 'error', 'undefined', '\foo', ''),
		($1, 1, 'info', 'loaded_file', 'a.sty', ''),
		($2, 1, 'warning', 'missing_file', 'foo.sty', 'in the warning task'),
		($3, 1, 'info', 'loaded_file', 'a.sty', '')`, f.bad, f.warn, f.ok)
	f.exec(`INSERT INTO report_changes (task_id) SELECT id FROM tasks`)
	_, err := reports.New(f.pool, nil, nil).FoldAll(f.ctx, 0)
	require.NoError(t, err)
	c := f.client()
	base := "/report?corpus=papers&service=tex_to_html"

	byStatus := c.get(base + "&severity=warning").body
	require.Contains(t, byStatus, `category=missing_file&amp;corpus=papers&amp;service=tex_to_html&amp;severity=warning">missing_file</a></td><td>1</td><td>1</td>`)
	require.Contains(t, byStatus, `id="all-tasks"`)

	top := c.get(base + "&all=1")
	require.Equal(t, http.StatusOK, top.code, top.body)
	require.Contains(t, top.body, "<strong>all tasks</strong>")
	require.Contains(t, top.body, `severity=info">info</a></td><td>2</td><td>2</td><td>50.0%</td><td><svg class="share"`)
	require.Contains(t, top.body, `severity=warning">warning</a></td><td>2</td><td>3</td><td>50.0%</td>`)
	require.Contains(t, top.body, `severity=error">error</a></td><td>1</td><td>2</td><td>25.0%</td>`)
	require.Contains(t, top.body, `<rect class="fill s-warning" width="60" height="10"/>`, "a share bar of half")

	cats := c.get(base + "&all=1&severity=warning").body
	require.Contains(t, cats, `missing_file</a></td><td>2</td><td>2</td><td>50.0%</td>`, "the warning inside the Fatal task too (2 of the 4 tasks)")
	// The Fatal task's errors are reachable.
	whats := c.get(base + "&all=1&severity=error&category=undefined").body
	require.Contains(t, whats, `\foo</a></td><td>1</td><td>2</td>`)
	msgs := c.get(base + "&all=1&severity=warning&category=missing_file&what=foo.sty").body
	require.Contains(t, msgs, "in the fatal task")
	require.Contains(t, msgs, "in the warning task")
	require.Contains(t, msgs, "<td>fatal</td>")
	info := c.get(base + "&severity=info")
	require.Equal(t, http.StatusOK, info.code, "info is a level of the all-tasks view")
	require.Contains(t, info.body, `loaded_file</a></td><td>2</td><td>2</td>`)
	require.Equal(t, http.StatusBadRequest, c.get(base+"&all=1&severity=no_problem").code)
	require.Equal(t, http.StatusBadRequest, c.get(base+"&all=yes").code)

	// The status view's top level has message counts and bars too.
	st := c.get(base).body
	require.Contains(t, st, `severity=fatal">fatal</a></td><td>1</td><td>1</td><td>25.0%</td><td><svg class="share"`)

	c.login(token)
	r := c.post("/rerun", url.Values{"csrf": {c.csrf()}, "corpus": {"papers"}, "service": {"tex_to_html"}, "all": {"1"},
		"severity": {"warning"}, "category": {"missing_file"}, "what": {"foo.sty"}})
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "2 tasks back to TODO")
	require.Equal(t, 0, f.status(f.bad))
	require.Equal(t, 0, f.status(f.warn))
	require.Equal(t, -1, f.status(f.ok))
}
