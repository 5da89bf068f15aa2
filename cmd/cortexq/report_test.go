package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
)

// reportRow is a row of the report's category and what levels, as --json prints it.
type reportRow struct {
	Name     string `json:"name"`
	Tasks    int64  `json:"tasks"`
	Messages int64  `json:"messages"`
}

// reportJSON is any rung of report --json (api.ReportSeverities, ReportNames, ReportTasks).
type reportJSON struct {
	Of    int64       `json:"of"`
	Count int64       `json:"count"`
	Rows  []reportRow `json:"rows"`
	// Tasks is the tasks' number on the first rung, the messages and their tasks on the last.
	Tasks json.RawMessage `json:"tasks"`
	Rerun string          `json:"rerun"`
	Fold  *struct {
		Pending  int64   `json:"pending"`
		FoldedAt *string `json:"folded_at"`
	} `json:"fold"`
	Messages []struct {
		TaskID  int64  `json:"task_id"`
		Entry   string `json:"entry"`
		Details string `json:"details"`
	} `json:"-"`
}

// report runs report --json with the flags given, folding the changes noted first.
func (d *testDB) report(args ...string) reportJSON {
	d.t.Helper()
	var r reportJSON
	out := d.ok(append([]string{"report", "--corpus", "c", "--service", "echo", "--json", "--limit", "1000", "--fold"}, args...)...)
	require.NoError(d.t, json.Unmarshal([]byte(out), &r), out)
	if len(r.Tasks) > 0 && r.Tasks[0] == '[' {
		require.NoError(d.t, json.Unmarshal(r.Tasks, &r.Messages), out)
	}
	return r
}

// Each level of the report counts what a brute-force pass over the rows counts, for random
// corpora: statuses, messages of current and earlier runs, Fatal tasks without fatal messages,
// and another corpus's tasks beside them. The rerun line of a what reruns exactly its tasks.
func TestReportCountsEqualBruteForce(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			d := newTestDB(t)
			rng := rand.New(rand.NewPCG(seed, 19))
			d.ok("service", "add", "echo")
			n := 80 + rng.IntN(80)
			d.importList("c", "echo", entries("t", n)...)
			d.importList("other", "echo", entries("o", 30)...)

			type task struct {
				id     int64
				status queue.Status
				run    int32
			}
			type msg struct {
				task                     int64
				run                      int32
				severity, category, what string
			}
			var tasks []task
			rows, err := d.pool.Query(d.ctx, `SELECT id FROM tasks ORDER BY id`)
			require.NoError(t, err)
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			require.NoError(t, err)
			statuses := []queue.Status{-1, -1, -2, -2, -3, -3, -4, -4, -5, 0, 1, -6}
			sevs := []string{"info", "warning", "error", "fatal", "invalid"}
			cats := []string{"undefined", "missing_file", "latex", "no_messages_like"}
			whats := []string{`\foo`, "x.sty", "all", "w"}
			var msgs []msg
			var copyRows [][]any
			for _, id := range ids {
				tk := task{id: id, status: statuses[rng.IntN(len(statuses))], run: int32(1 + rng.IntN(3))}
				_, err := d.pool.Exec(d.ctx, `UPDATE tasks SET status = $2, run = $3 WHERE id = $1`, tk.id, tk.status, tk.run)
				require.NoError(t, err)
				tasks = append(tasks, tk)
				for range rng.IntN(7) {
					m := msg{task: id, run: tk.run, severity: sevs[rng.IntN(len(sevs))],
						category: cats[rng.IntN(len(cats))], what: whats[rng.IntN(len(whats))]}
					if rng.IntN(5) == 0 {
						m.run = tk.run + 1 - 2*int32(rng.IntN(2)) // not the current run
					}
					msgs = append(msgs, m)
					copyRows = append(copyRows, []any{m.task, m.run, m.severity, m.category, m.what, "d"})
				}
			}
			_, err = d.pool.CopyFrom(d.ctx, pgx.Identifier{"task_messages"},
				[]string{"task_id", "run", "severity", "category", "what", "details"}, pgx.CopyFromRows(copyRows))
			require.NoError(t, err)
			// Written behind the write paths' backs, as an operator in psql would: note the
			// tasks for the report's fold (docs/reports.md#rollups).
			_, err = d.pool.Exec(d.ctx, `INSERT INTO report_changes (task_id) SELECT id FROM tasks`)
			require.NoError(t, err)
			cID := d.scope("c", "echo").CorpusID
			var corpusOf = map[int64]bool{}
			rows, err = d.pool.Query(d.ctx, `SELECT id FROM tasks WHERE corpus_id = $1`, cID)
			require.NoError(t, err)
			inC, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			require.NoError(t, err)
			for _, id := range inC {
				corpusOf[id] = true
			}
			byID := map[int64]task{}
			for _, tk := range tasks {
				byID[tk.id] = tk
			}

			// Level 0.
			want := map[string]int64{}
			for _, tk := range tasks {
				if corpusOf[tk.id] {
					want[statusName(tk.status)]++
				}
			}
			top := d.report()
			got := map[string]int64{}
			for _, s := range top.Rows {
				if s.Tasks > 0 {
					got[s.Name] = s.Tasks
				}
			}
			require.Equal(t, want, got)
			require.Equal(t, int64(len(inC))-want["invalid"], top.Of)

			// Levels 1 to 3, brute force.
			type agg struct {
				tasks    map[int64]bool
				messages int64
			}
			count := func(keep func(msg) bool, key func(msg) string) map[string]*agg {
				out := map[string]*agg{}
				for _, m := range msgs {
					if !corpusOf[m.task] || m.run != byID[m.task].run || !keep(m) {
						continue
					}
					a := out[key(m)]
					if a == nil {
						a = &agg{tasks: map[int64]bool{}}
						out[key(m)] = a
					}
					a.tasks[m.task] = true
					a.messages++
				}
				return out
			}
			asRows := func(as map[string]*agg) map[string]reportRow {
				out := map[string]reportRow{}
				for k, a := range as {
					out[k] = reportRow{Name: k, Tasks: int64(len(a.tasks)), Messages: a.messages}
				}
				return out
			}
			gotRows := func(r reportJSON) map[string]reportRow {
				out := map[string]reportRow{}
				for _, row := range r.Rows {
					out[row.Name] = row
				}
				require.Equal(t, int64(len(r.Rows)), r.Count)
				return out
			}
			checked := 0
			for _, name := range strings.Split(queue.ReportSeverityNames(), ", ") {
				var sv struct {
					status  queue.Status
					message queue.Severity
				}
				sv.status, sv.message, _ = queue.ReportSeverity(name)
				ofSev := func(m msg) bool {
					return byID[m.task].status == sv.status && m.severity == string(sv.message)
				}
				wantCats := asRows(count(ofSev, func(m msg) string { return m.category }))
				if sv.status == queue.StatusFatal {
					var none int64
					for _, tk := range tasks {
						if !corpusOf[tk.id] || tk.status != queue.StatusFatal {
							continue
						}
						has := false
						for _, m := range msgs {
							has = has || m.task == tk.id && m.run == tk.run && m.severity == "fatal"
						}
						if !has {
							none++
						}
					}
					if none > 0 {
						wantCats["no_messages"] = reportRow{Name: "no_messages", Tasks: none}
					}
				}
				r := d.report("--severity", name)
				require.Equal(t, wantCats, gotRows(r), "severity %s", name)
				for cat := range wantCats {
					var wantWhats map[string]reportRow
					if cat == "no_messages" {
						wantWhats = map[string]reportRow{"no_messages": {Name: "no_messages", Tasks: wantCats[cat].Tasks}}
					} else {
						wantWhats = asRows(count(func(m msg) bool { return ofSev(m) && m.category == cat },
							func(m msg) string { return m.what }))
					}
					r := d.report("--severity", name, "--category", cat)
					require.Equal(t, wantWhats, gotRows(r), "severity %s category %s", name, cat)
					for what, w := range wantWhats {
						r := d.report("--severity", name, "--category", cat, "--what", what)
						var gotTasks []int64
						seen := map[int64]bool{}
						for _, m := range r.Messages {
							gotTasks = append(gotTasks, m.TaskID)
							seen[m.TaskID] = true
						}
						require.True(t, sort.SliceIsSorted(gotTasks, func(i, j int) bool { return gotTasks[i] < gotTasks[j] }))
						require.Equal(t, w.Tasks, int64(len(seen)), "tasks of %s/%s/%s", name, cat, what)
						if cat != "no_messages" {
							require.Equal(t, w.Messages, int64(len(r.Messages)), "messages of %s/%s/%s", name, cat, what)
						}
						checked++
					}
				}
			}
			require.Positive(t, checked)

			// The rerun line of the biggest error what reruns exactly its tasks.
			r := d.report("--severity", "error")
			require.NotEmpty(t, r.Rows)
			cat := r.Rows[0].Name
			r = d.report("--severity", "error", "--category", cat)
			require.NotEmpty(t, r.Rows)
			what, r0 := r.Rows[0], r
			r = d.report("--severity", "error", "--category", cat, "--what", what.Name)
			require.True(t, strings.HasPrefix(r.Rerun, "cortexq rerun "), r.Rerun)
			args := shellFields(t, strings.TrimPrefix(r.Rerun, "cortexq "))
			out := d.ok(args...) // as printed: a preview of the same count
			require.Contains(t, out, fmt.Sprintf(": %d tasks would go back to TODO", what.Tasks))
			out = d.ok(append(args, "--yes")...)
			require.Contains(t, out, fmt.Sprintf(": %d tasks back to TODO", what.Tasks))

			// Until the next fold the whats of the category are as they were, the rerun's
			// changes pending; after it, the what's tasks (TODO now) are gone from them.
			var stale reportJSON
			out = d.ok("report", "--corpus", "c", "--service", "echo", "--json", "--severity", "error", "--category", cat)
			require.NoError(t, json.Unmarshal([]byte(out), &stale), out)
			require.Equal(t, r0.Rows, stale.Rows)
			require.NotNil(t, stale.Fold)
			require.Equal(t, what.Tasks, stale.Fold.Pending)
			require.NotNil(t, stale.Fold.FoldedAt)
			fresh := d.report("--severity", "error", "--category", cat)
			require.Zero(t, fresh.Fold.Pending)
			rows, err = d.pool.Query(d.ctx, `SELECT id, status, run FROM tasks`)
			require.NoError(t, err)
			for rows.Next() {
				var tk task
				require.NoError(t, rows.Scan(&tk.id, &tk.status, &tk.run))
				byID[tk.id] = tk
			}
			require.NoError(t, rows.Err())
			wantFresh := asRows(count(func(m msg) bool {
				return byID[m.task].status == queue.StatusError && m.severity == "error" && m.category == cat
			}, func(m msg) string { return m.what }))
			require.NotContains(t, wantFresh, what.Name)
			require.Equal(t, wantFresh, gotRows(fresh))
		})
	}
}

// shellFields splits a command line that shellQuote made.
func shellFields(t *testing.T, s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, quoted := false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case inQuote && ch == '\'':
			inQuote = false
		case inQuote:
			cur.WriteByte(ch)
		case ch == '\'':
			inQuote, quoted = true, true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case ch == ' ':
			if quoted || cur.Len() > 0 {
				out = append(out, cur.String())
			}
			cur.Reset()
			quoted = false
		default:
			cur.WriteByte(ch)
		}
	}
	require.False(t, inQuote, "unterminated quote in %q", s)
	if quoted || cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func TestShellQuoteRoundTrips(t *testing.T) {
	for _, s := range []string{`\foo`, "it's", "a b", "", "plain", `$HOME`, "x.sty"} {
		line := commandLine("rerun", "what", s, "category", "c")
		got := shellFields(t, strings.TrimPrefix(line, "cortexq "))
		if s == "" {
			require.Equal(t, []string{"rerun", "--category", "c"}, got)
			continue
		}
		require.Equal(t, []string{"rerun", "--what", s, "--category", "c"}, got, line)
	}
}

// A Fatal task with no fatal message is reported, and rerun, under category no_messages.
func TestReportNoMessagesAndPaging(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 5)...)
	sc := d.scope("c", "echo")
	leases := d.lease(sc.ServiceID, "w0", "w1", "w2", "w3", "w4")
	for i, l := range leases {
		r := lease.Result{TaskID: l.TaskID, Worker: fmt.Sprintf("w%d", i), Kind: lease.KindReport, Status: queue.StatusFatal}
		if i < 2 {
			r.Messages = []queue.Message{{Severity: queue.SeverityFatal, Category: "latex", What: fmt.Sprintf("w%d", i)}}
		}
		require.Equal(t, lease.OutcomeAccepted, d.claim(r).Outcome)
	}
	r := d.report("--severity", "fatal")
	require.Equal(t, []reportRow{{Name: "no_messages", Tasks: 3}, {Name: "latex", Tasks: 2, Messages: 2}}, r.Rows)
	r = d.report("--severity", "fatal", "--category", "no_messages")
	require.Equal(t, []reportRow{{Name: "no_messages", Tasks: 3}}, r.Rows)
	r = d.report("--severity", "fatal", "--category", "no_messages", "--what", "no_messages")
	require.Len(t, r.Messages, 3)
	require.Equal(t, "cortexq rerun --corpus c --service echo --severity fatal --category no_messages --what no_messages", r.Rerun)

	// Pages.
	r = d.report("--severity", "fatal", "--category", "latex", "--limit", "1", "--offset", "1")
	require.Equal(t, []reportRow{{Name: "w1", Tasks: 1, Messages: 1}}, r.Rows)
	require.Equal(t, int64(2), r.Count)

	// The human table: aligned columns, the total, the rerun line.
	out := d.ok("report", "--corpus", "c", "--service", "echo")
	require.Contains(t, out, "corpus c, service echo: 5 tasks, 5 of them not Invalid")
	require.Regexp(t, `(?m)^fatal\s+5\s+100\.00%\s*$`, out)
	require.Contains(t, out, "rerun all: cortexq rerun --corpus c --service echo\n")
	out = d.ok("report", "--corpus", "c", "--service", "echo", "--severity", "fatal", "--csv")
	require.Equal(t, "category,tasks,messages\nno_messages,3,0\nlatex,2,2\n", out)

	out = d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo", "--severity", "fatal", "--category", "no_messages")
	require.Contains(t, out, ": 3 tasks back to TODO")
	require.Equal(t, 3, d.count(`SELECT count(*) FROM tasks WHERE status = 0`))
}

// Bad input to report, runs, diff and sandbox: one clear line, exit 2.
func TestReportBadInput(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 3)...)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"UnknownCorpus", []string{"report", "--corpus", "nope", "--service", "echo"}, "corpus nope: not found"},
		{"UnknownService", []string{"report", "--corpus", "c", "--service", "nope"}, "service nope: not found"},
		{"UnknownSeverity", []string{"report", "--corpus", "c", "--service", "echo", "--severity", "bad"}, `--severity "bad": want one of error, fatal, invalid, no_problem, warning`},
		{"NegativeOffset", []string{"report", "--corpus", "c", "--service", "echo", "--offset", "-1"}, "--offset -1: want 0 to 100000"},
		{"OffsetOverCap", []string{"report", "--corpus", "c", "--service", "echo", "--offset", "100001"}, "--offset 100001: want 0 to 100000"},
		{"LimitOverCap", []string{"report", "--corpus", "c", "--service", "echo", "--limit", "1001"}, "--limit 1001: want 1 to 1000"},
		{"ZeroLimit", []string{"report", "--corpus", "c", "--service", "echo", "--limit", "0"}, "--limit 0: want 1 to 1000"},
		{"CategoryWithoutSeverity", []string{"report", "--corpus", "c", "--service", "echo", "--category", "x"}, "--category needs --severity"},
		{"WhatWithoutCategory", []string{"report", "--corpus", "c", "--service", "echo", "--severity", "error", "--what", "x"}, "--what needs --category"},
		{"JSONAndCSV", []string{"report", "--corpus", "c", "--service", "echo", "--json", "--csv"}, "give --json or --csv, not both"},
		{"RunsUnknownCorpus", []string{"runs", "--corpus", "nope", "--service", "echo"}, "corpus nope: not found"},
		{"DiffNothingToCompare", []string{"diff", "--corpus", "c", "--service", "echo"}, "is the first run of the corpus and service"},
		{"DiffUnknownRun", []string{"diff", "--corpus", "c", "--service", "echo", "--from", "99"}, "--from 99: no such run"},
		{"DiffBadStatus", []string{"diff", "--corpus", "c", "--service", "echo", "--from-status", "meh", "--to-status", "error"}, `--from-status "meh"`},
		{"DiffOneStatus", []string{"diff", "--corpus", "c", "--service", "echo", "--to-status", "error"}, "give both --from-status and --to-status"},
		{"DiffNegativeOffset", []string{"diff", "--corpus", "c", "--service", "echo", "--offset", "-5"}, "--offset -5: want 0 to 100000"},
		{"RerunUnknownCorpus", []string{"rerun", "--corpus", "nope", "--service", "echo"}, "corpus nope: not found"},
		{"SandboxUnknownParent", []string{"sandbox", "create", "sb", "--from", "nope", "--service", "echo"}, "corpus nope: not found"},
		{"SandboxEmptySelection", []string{"sandbox", "create", "sb", "--from", "c", "--service", "echo", "--severity", "error"}, "the selection holds no task"},
		{"SandboxExists", []string{"sandbox", "create", "c", "--from", "c", "--service", "echo"}, "a corpus named c already exists"},
		{"SandboxDeleteNotASandbox", []string{"sandbox", "delete", "c"}, "no sandbox named c"},
		{"SandboxNoName", []string{"sandbox", "create", "--from", "c", "--service", "echo"}, "want one argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cortexq(t, d.env, tc.args...)
			oneLineFailure(t, r, tc.want)
			require.Equal(t, 2, r.code, "exit code of a usage error: %s", r.stderr)
		})
	}
	require.Equal(t, 1, d.count(`SELECT count(*) FROM corpora WHERE name = 'c'`))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM corpora WHERE parent_corpus_id IS NOT NULL`))
}

// TestReportAll: --all counts a severity's messages in every task whatever its status (the
// warning inside a Fatal task, infos), and its rerun line (--all) reruns those tasks.
func TestReportAll(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 3)...)
	sc := d.scope("c", "echo")
	leases := d.lease(sc.ServiceID, "w0", "w1", "w2")
	warn := queue.Message{Severity: queue.SeverityWarning, Category: "missing_file", What: "foo.sty"}
	results := []struct {
		status queue.Status
		msgs   []queue.Message
	}{
		{queue.StatusFatal, []queue.Message{warn, {Severity: queue.SeverityError, Category: "undefined", What: `\foo`},
			{Severity: queue.SeverityError, Category: "undefined", What: `\foo`}, {Severity: queue.SeverityFatal, Category: "latex", What: "x"}}},
		{queue.StatusWarning, []queue.Message{warn}},
		{queue.StatusNoProblem, []queue.Message{{Severity: queue.SeverityInfo, Category: "loaded_file", What: "a.sty"}}},
	}
	for i, l := range leases {
		r := lease.Result{TaskID: l.TaskID, Worker: fmt.Sprintf("w%d", i), Kind: lease.KindReport, Status: results[i].status, Messages: results[i].msgs}
		require.Equal(t, lease.OutcomeAccepted, d.claim(r).Outcome)
	}
	// By status, the warning counts in the Warning task only.
	r := d.report("--severity", "warning")
	require.Equal(t, []reportRow{{Name: "missing_file", Tasks: 1, Messages: 1}}, r.Rows)
	r = d.report("--all", "--severity", "warning")
	require.Equal(t, []reportRow{{Name: "missing_file", Tasks: 2, Messages: 2}}, r.Rows)
	require.Equal(t, "cortexq rerun --corpus c --service echo --severity warning --all", r.Rerun)
	r = d.report("--all", "--severity", "error", "--category", "undefined")
	require.Equal(t, []reportRow{{Name: `\foo`, Tasks: 1, Messages: 2}}, r.Rows)
	r = d.report("--all", "--severity", "info")
	require.Equal(t, []reportRow{{Name: "loaded_file", Tasks: 1, Messages: 1}}, r.Rows)
	r = d.report("--all", "--severity", "warning", "--category", "missing_file", "--what", "foo.sty")
	require.Len(t, r.Messages, 2)
	out := d.ok("report", "--corpus", "c", "--service", "echo", "--all")
	require.Regexp(t, `(?m)^warning\s+2\s+2\s+66\.67%\s*$`, out)
	require.Regexp(t, `(?m)^error\s+1\s+2\s+33\.33%\s*$`, out)
	require.Regexp(t, `(?m)^info\s+1\s+1\s+33\.33%\s*$`, out)

	out = d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo", "--severity", "warning", "--category", "missing_file", "--all")
	require.Contains(t, out, ": 2 tasks back to TODO")
	require.Equal(t, 2, d.count(`SELECT count(*) FROM tasks WHERE status = 0`))
}
