package main

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/queuetest/cortexsite"
	"github.com/cortexq/cortexq/queue/reports"
)

// writeZip writes a small zip archive at path.
func writeZip(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.Create(path)
	require.NoError(t, err)
	z := zip.NewWriter(f)
	for name, body := range map[string]string{"main.tex": `\documentclass{article}\begin{document}x\end{document}`,
		// The test's worker returns its source as the result: a log that says NoProblem.
		"cortex.log": "Info:cortex:converted\nStatus:conversion:0\n"} {
		w, err := z.Create(name)
		require.NoError(t, err)
		_, err = w.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, z.Close())
	require.NoError(t, f.Close())
}

// cortexStatuses maps CorTeX's statuses (as imported) to the names the CLI prints.
var cortexStatusNames = map[int]string{0: "todo", -1: "no_problem", -2: "warning", -3: "error", -4: "fatal", -5: "invalid", -6: "blocked"}

// reportSeverities are the report's severities: the task status, CorTeX's message table.
var reportSeverities = []struct {
	status queue.Status
	sev    queue.Severity
	table  string
}{
	{queue.StatusNoProblem, queue.SeverityInfo, "log_infos"},
	{queue.StatusWarning, queue.SeverityWarning, "log_warnings"},
	{queue.StatusError, queue.SeverityError, "log_errors"},
	{queue.StatusFatal, queue.SeverityFatal, "log_fatals"},
	{queue.StatusInvalid, queue.SeverityInvalid, "log_invalids"},
}

// ladder is a report's counts: "severity", "severity/category", "severity/category/what" →
// tasks and messages, and "severity/category/what/entry" → messages.
type ladder map[string][2]int64

// cortexLadder counts, by SQL on CorTeX's database, what the report ladder of a corpus and
// service shows: per severity the messages of the tasks of that status, by category, what and
// task (NULL category or what: ”).
func cortexLadder(t *testing.T, src *pgx.Conn, corpus, service string) ladder {
	t.Helper()
	out := ladder{}
	for _, s := range reportSeverities {
		rows, err := src.Query(context.Background(), `SELECT coalesce(m.category, ''), coalesce(m.what, ''), btrim(t.entry, E' \t\r\n')
			FROM `+s.table+` m JOIN tasks t ON t.id = m.task_id
			JOIN corpora c ON c.id = t.corpus_id JOIN services v ON v.id = t.service_id
			WHERE c.name = $1 AND v.name = $2 AND t.status = $3`, corpus, service, int(s.status))
		require.NoError(t, err)
		seen := map[string]bool{}
		for rows.Next() {
			var cat, what, entry string
			require.NoError(t, rows.Scan(&cat, &what, &entry))
			for _, k := range []string{string(s.sev) + "/" + cat, string(s.sev) + "/" + cat + "/" + what} {
				c := out[k]
				c[1]++
				if !seen[k+"|"+entry] {
					seen[k+"|"+entry], c[0] = true, c[0]+1
				}
				out[k] = c
			}
			c := out[string(s.sev)+"/"+cat+"/"+what+"/"+entry]
			c[1]++
			out[string(s.sev)+"/"+cat+"/"+what+"/"+entry] = c
		}
		require.NoError(t, rows.Err())
	}
	return out
}

// ourLadder reads the same counts from cortexq's report (its rollups, as of the import's fold).
func ourLadder(t *testing.T, d *testDB, corpus, service string) ladder {
	t.Helper()
	sc := d.scope(corpus, service)
	out := ladder{}
	for _, s := range reportSeverities {
		sl := reports.Slice{Scope: sc, Status: s.status, Severity: s.sev, Limit: reports.ReportMaxLimit}
		cats, _, err := d.root.Reports.ReportCategories(d.ctx, sl)
		require.NoError(t, err)
		for _, c := range cats {
			out[string(s.sev)+"/"+c.Name] = [2]int64{c.Tasks, c.Messages}
			sl.Category = c.Name
			whats, _, err := d.root.Reports.ReportWhats(d.ctx, sl)
			require.NoError(t, err)
			for _, w := range whats {
				key := string(s.sev) + "/" + c.Name + "/" + w.Name
				out[key] = [2]int64{w.Tasks, w.Messages}
				sl.What = w.Name
				msgs, err := d.root.Reports.ReportMessages(d.ctx, sl)
				require.NoError(t, err)
				for _, m := range msgs {
					k := out[key+"/"+m.Entry]
					k[1]++
					out[key+"/"+m.Entry] = k
				}
			}
			sl.What = ""
		}
	}
	return out
}

// A CorTeX site moves in: its database (CorTeX's schema, on the PostgreSQL the tests run, 18 in
// CI's second pass) is imported by a role that may only read it; the report ladder of every
// corpus and service counts what SQL counts on CorTeX's database, runs lists CorTeX's runs with
// their tallies, the diff of the last two closed runs is the transition matrix of their
// snapshots; a second import changes nothing; then a worker converts the TODO tasks, and nothing
// finished is converted again (nor undone by another import).
func TestImportCortex(t *testing.T) {
	d := newTestDB(t)
	root := t.TempDir()
	site := cortexsite.New(t, root)
	for n := range 40 {
		writeZip(t, filepath.Join(root, "arxiv", fmt.Sprintf("d%d/d%d.zip", n, n)))
	}
	for n := range 5 {
		writeZip(t, filepath.Join(root, "zbl", fmt.Sprintf("z%d/z%d.zip", n, n)))
	}
	src, err := pgx.Connect(d.ctx, site.ReaderDSN)
	require.NoError(t, err)
	defer src.Close(d.ctx)

	dry := d.ok("import", "--from-cortex", site.ReaderDSN, "--dry-run")
	require.Regexp(t, `(?m)^tasks\s+59$`, dry)
	require.Equal(t, 0, d.count(`SELECT count(*) FROM tasks`), "a dry run writes nothing")

	out := d.ok("import", "--from-cortex", site.ReaderDSN)
	require.Contains(t, out, "corpus arXiv: 40 entries, 50 tasks (50 added, 0 updated), 84 messages, 5 runs added, 80 task statuses of closed runs")
	require.Contains(t, out, "2 services, 3 corpora, 3 workers added")
	again := d.ok("import", "--from-cortex", site.ReaderDSN)
	require.Contains(t, again, "corpus arXiv: 40 entries, 50 tasks (0 added, 0 updated), 0 messages, 0 runs added, 0 task statuses")
	require.Contains(t, again, "0 workers added")

	for _, sc := range [][2]string{{"arXiv", "tex_to_html"}, {"arXiv", "echo"}, {"arXiv-errors", "tex_to_html"}, {"zbMATH", "tex_to_html"}} {
		want := cortexLadder(t, src, sc[0], sc[1])
		require.NotEmpty(t, want)
		require.Equal(t, want, ourLadder(t, d, sc[0], sc[1]), "report ladder of %s × %s", sc[0], sc[1])
	}

	// The imported sandbox finds its result archives under its CorTeX id; verify checks them.
	for _, n := range []int{5, 15, 25} {
		writeZip(t, filepath.Join(root, "arxiv", fmt.Sprintf("d%d/tex_to_html.sandbox-2.zip", n)))
	}
	r := cortexq(t, d.env, "verify", "--corpus", "arXiv-errors", "--service", "tex_to_html")
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Regexp(t, `missing .*/d35/tex_to_html\.sandbox-2\.zip`, r.stdout)
	require.NotRegexp(t, `(?m)^orphan`, r.stdout)
	writeZip(t, filepath.Join(root, "arxiv", "d35/tex_to_html.sandbox-2.zip"))
	d.ok("verify", "--corpus", "arXiv-errors", "--service", "tex_to_html")

	runs := d.importedRuns(src)
	d.diffEqualsSnapshots(src, runs)
	d.convertTheTODOTasks(site.ReaderDSN)
}

// importedRuns checks that runs lists every CorTeX run of arXiv × tex_to_html, closed ones with
// their tallies, and returns the ids of the two closed runs.
func (d *testDB) importedRuns(src *pgx.Conn) [2]int64 {
	t := d.t
	var list api.Runs
	require.NoError(t, json.Unmarshal([]byte(d.ok("runs", "--corpus", "arXiv", "--service", "tex_to_html", "--json")), &list))
	runs := list.Runs
	rows, err := src.Query(d.ctx, `SELECT total, no_problem, warning, error, fatal, invalid, in_progress, owner, description,
			end_time IS NULL FROM historical_runs WHERE corpus_id = 1 AND service_id = 3 ORDER BY start_time`)
	require.NoError(t, err)
	i := 0
	for ; rows.Next(); i++ {
		var want reports.Tally
		var owner, note string
		var open bool
		require.NoError(t, rows.Scan(&want.Tasks, &want.NoProblem, &want.Warning, &want.Error, &want.Fatal, &want.Invalid,
			&want.TODO, &owner, &note, &open))
		require.Less(t, i, len(runs))
		require.Equal(t, owner, runs[i].Owner)
		require.Equal(t, note, runs[i].Note)
		require.Equal(t, open, runs[i].EndedAt == nil)
		if !open {
			r := runs[i]
			got := reports.Tally{Tasks: r.Tasks, TODO: r.Todo, NoProblem: r.NoProblem, Warning: r.Warning, Error: r.Error,
				Fatal: r.Fatal, Invalid: r.Invalid, Blocked: r.Blocked}
			require.Equal(t, want, got, "run %d", i)
		}
	}
	require.NoError(t, rows.Err())
	require.Len(t, runs, i)
	require.Equal(t, 3, i)
	return [2]int64{runs[0].ID, runs[1].ID}
}

// diffEqualsSnapshots checks that diff of the two closed runs is the transition matrix of the
// snapshots CorTeX took as they closed.
func (d *testDB) diffEqualsSnapshots(src *pgx.Conn, runs [2]int64) {
	t := d.t
	rows, err := src.Query(d.ctx, `SELECT a.status, b.status, count(*) FROM historical_tasks a
		JOIN historical_tasks b ON b.task_id = a.task_id AND b.saved_at = '2025-02-03 00:00:01'
		WHERE a.saved_at = '2025-01-05 00:00:01' GROUP BY 1, 2`)
	require.NoError(t, err)
	want := map[string]int64{}
	for rows.Next() {
		var from, to int
		var n int64
		require.NoError(t, rows.Scan(&from, &to, &n))
		want[cortexStatusNames[from]+" → "+cortexStatusNames[to]] = n
	}
	require.NoError(t, rows.Err())
	require.Len(t, want, 9)
	out := d.ok("diff", "--corpus", "arXiv", "--service", "tex_to_html", "--json",
		"--from", strconv.FormatInt(runs[0], 10), "--to", strconv.FormatInt(runs[1], 10))
	var r diffJSON
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	require.Equal(t, want, r.matrix())
}

// convertTheTODOTasks runs a replica and a worker of tex_to_html until arXiv has no TODO task:
// only the tasks CorTeX had not finished are leased, and an import after that leaves them be.
func (d *testDB) convertTheTODOTasks(cortexDSN string) {
	t := d.t
	todo := `SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id WHERE c.name = 'arXiv' AND t.status IN (0, 1)`
	require.Equal(t, 12, d.count(todo), "TODO and leased in CorTeX: TODO")
	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	rp := d.start("serve", "--replica", "r1", "--ventilator", vent, "--sink", sink,
		"--http", fmt.Sprintf("127.0.0.1:%d", loopbackPort(t)))
	worker := d.start("worker", "exec", "--service", "tex_to_html", "--ventilator", vent, "--sink", sink,
		"--identity", "latexml-3", "--", "sh", "-c", `cp "$0" "$1"`, "{in}", "{out}")
	require.Eventually(t, func() bool { return d.count(todo) == 0 }, 2*time.Minute, 100*time.Millisecond,
		"the TODO tasks converted; replica:\n%s\nworker:\n%s", rp.log(), worker.log())
	require.Equal(t, 0, worker.stop(syscall.SIGTERM, time.Minute), worker.log())
	require.Equal(t, 0, rp.stop(syscall.SIGTERM, time.Minute), rp.log())
	require.Equal(t, 12, d.count(`SELECT count(DISTINCT task_id) FROM attempts`))
	require.Zero(t, d.count(`SELECT count(*) FROM attempts a JOIN cortex_tasks c ON c.task_id = a.task_id
		WHERE c.cortex_status < 0`), "nothing CorTeX finished (or blocked) is converted again")
	require.Equal(t, 4, d.count(`SELECT count(*) FROM tasks WHERE status = -6`), "blocked stays paused")
	for n := range 3 {
		_, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(d.entryOf(n))), fmt.Sprintf("d%d", n), "tex_to_html.zip"))
		require.NoError(t, err)
	}
	out := d.ok("import", "--from-cortex", cortexDSN)
	require.Contains(t, out, "(0 added, 0 updated)")
	require.Zero(t, d.count(`SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id
		JOIN services s ON s.id = t.service_id WHERE c.name = 'arXiv' AND s.name = 'tex_to_html' AND t.status = 0`),
		"an import after the conversion leaves cortexq's results be")
}

// entryOf is the entry of arXiv document n.
func (d *testDB) entryOf(n int) string {
	var entry string
	require.NoError(d.t, d.pool.QueryRow(d.ctx, `SELECT entry FROM corpus_entries WHERE entry LIKE $1`,
		fmt.Sprintf("%%/d%d/d%d.zip", n, n)).Scan(&entry))
	return strings.TrimSpace(entry)
}
