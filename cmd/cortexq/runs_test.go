package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/lease"
)

type diffJSON struct {
	From  int64 `json:"from"`
	To    int64 `json:"to"`
	Cells []struct {
		From  string `json:"from"`
		To    string `json:"to"`
		Tasks int64  `json:"tasks"`
	} `json:"cells"`
	Tasks []struct {
		TaskID int64  `json:"task_id"`
		Entry  string `json:"entry"`
	} `json:"tasks"`
}

func (d *testDB) diff(args ...string) diffJSON {
	d.t.Helper()
	out := d.ok(append([]string{"diff", "--corpus", "c", "--service", "echo", "--json"}, args...)...)
	var r diffJSON
	require.NoError(d.t, json.Unmarshal([]byte(out), &r), out)
	return r
}

func (r diffJSON) matrix() map[string]int64 {
	m := map[string]int64{}
	for _, c := range r.Cells {
		m[c.From+" → "+c.To] = c.Tasks
	}
	return m
}

// finish leases every TODO task of the scope and records status for it, or the status byTask
// gives it.
func (d *testDB) finish(sc queue.Scope, status queue.Status, byTask map[int64]queue.Status) {
	d.t.Helper()
	todo := d.count(`SELECT count(*) FROM tasks WHERE corpus_id = $1 AND status = 0`, sc.CorpusID)
	workers := make([]string, todo)
	for i := range workers {
		workers[i] = fmt.Sprintf("w%d", i)
	}
	for i, l := range d.lease(sc.ServiceID, workers...) {
		st := status
		if s, ok := byTask[l.TaskID]; ok {
			st = s
		}
		var msgs []queue.Message
		if st == queue.StatusError {
			msgs = []queue.Message{{Severity: queue.SeverityError, Category: "undefined", What: `\foo`}}
		}
		dec := d.claim(lease.Result{TaskID: l.TaskID, Worker: workers[i], Kind: lease.KindReport, Status: st, Messages: msgs})
		require.Equal(d.t, lease.OutcomeAccepted, dec.Outcome)
	}
}

// A rerun of the errors that fixes some of them: diff shows exactly those transitions, its
// cells list exactly those tasks, and runs shows both runs' tallies.
func TestDiffOfARerunThatFixedSomeTasks(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 12)...)
	sc := d.scope("c", "echo")
	var ids []int64
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT array_agg(id ORDER BY id) FROM tasks`).Scan(&ids))
	// Run 1: tasks 0-4 Error, 5 Fatal, the rest NoProblem.
	first := map[int64]queue.Status{ids[5]: queue.StatusFatal}
	for _, id := range ids[:5] {
		first[id] = queue.StatusError
	}
	d.finish(sc, queue.StatusNoProblem, first)
	out := d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo", "--severity", "error", "--note", "new latexml")
	require.Contains(t, out, ": 5 tasks back to TODO")

	// Mid-run: the rerun tasks are TODO.
	require.Equal(t, map[string]int64{"error → todo": 5, "fatal → fatal": 1, "no_problem → no_problem": 6}, d.diff().matrix())

	// Run 2: tasks 0-2 fixed, 3 still Error, 4 Warning.
	d.finish(sc, queue.StatusNoProblem, map[int64]queue.Status{ids[3]: queue.StatusError, ids[4]: queue.StatusWarning})
	r := d.diff()
	require.Equal(t, map[string]int64{"error → no_problem": 3, "error → error": 1, "error → warning": 1,
		"fatal → fatal": 1, "no_problem → no_problem": 6}, r.matrix())
	require.Zero(t, r.To, "the current run")
	cell := d.diff("--from-status", "error", "--to-status", "no_problem")
	var got []int64
	for _, x := range cell.Tasks {
		got = append(got, x.TaskID)
	}
	require.Equal(t, ids[:3], got)
	cell = d.diff("--from-status", "error", "--to-status", "no_problem", "--limit", "2", "--offset", "1")
	require.Len(t, cell.Tasks, 2)
	require.Equal(t, ids[1], cell.Tasks[0].TaskID)

	// People read the matrix with arrows and separators.
	human := d.ok("diff", "--corpus", "c", "--service", "echo")
	require.Regexp(t, `(?m)^error\s+→\s+no_problem\s+3\s*$`, human)
	require.NotContains(t, human, "as of the fold", "no matrix is kept before a fold: counted on the spot")

	// Folded, the matrix is read from the kept one, as of the fold; the closed pair, kept on
	// first use, reads the same the second time.
	human = d.ok("diff", "--corpus", "c", "--service", "echo", "--fold")
	require.Regexp(t, `(?m)^error\s+→\s+no_problem\s+3\s*$`, human)
	require.Contains(t, human, "counts as of the fold 0s ago")
	require.Equal(t, r.matrix(), d.diff().matrix())

	// A third run: the closed runs compare with each other, and with a new task imported meanwhile.
	d.importList("c", "echo", entries("t", 13)...)
	d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo", "--severity", "error")
	var rs api.Runs
	require.NoError(t, json.Unmarshal([]byte(d.ok("runs", "--corpus", "c", "--service", "echo", "--json")), &rs))
	runs := rs.Runs
	require.Len(t, runs, 3)
	require.Equal(t, "new latexml", runs[1].Note)
	require.Equal(t, int64(5), runs[0].Error)
	require.Equal(t, int64(1), runs[1].Error)
	require.Equal(t, int64(13), runs[1].Tasks)
	require.Nil(t, runs[2].EndedAt)
	r = d.diff("--from", strconv.FormatInt(runs[0].ID, 10), "--to", strconv.FormatInt(runs[1].ID, 10))
	require.Equal(t, map[string]int64{"error → no_problem": 3, "error → error": 1, "error → warning": 1,
		"fatal → fatal": 1, "no_problem → no_problem": 6, "new → todo": 1}, r.matrix())
	cell = d.diff("--from", strconv.FormatInt(runs[0].ID, 10), "--to", strconv.FormatInt(runs[1].ID, 10),
		"--from-status", "new", "--to-status", "todo")
	require.Len(t, cell.Tasks, 1)
	require.Equal(t, "/corpus/t12/t12.zip", cell.Tasks[0].Entry)
	r = d.diff()
	require.Equal(t, map[string]int64{"error → todo": 1, "warning → warning": 1, "no_problem → no_problem": 9,
		"fatal → fatal": 1, "todo → todo": 1}, r.matrix())
	require.Equal(t, r.matrix(), d.diff("--fold").matrix(), "the matrix kept after the rerun")
	for range 2 {
		r = d.diff("--from", strconv.FormatInt(runs[0].ID, 10), "--to", strconv.FormatInt(runs[1].ID, 10))
		require.Equal(t, map[string]int64{"error → no_problem": 3, "error → error": 1, "error → warning": 1,
			"fatal → fatal": 1, "no_problem → no_problem": 6, "new → todo": 1}, r.matrix())
	}
	require.Positive(t, d.count(`SELECT count(*) FROM run_diffs`), "the closed runs' matrix is kept")

	human = d.ok("runs", "--corpus", "c", "--service", "echo")
	require.Contains(t, human, "corpus c, service echo: 3 runs")
	require.Regexp(t, `(?m)^`+strconv.FormatInt(runs[0].ID, 10)+`\s.*\s12\s+6 \(50\.00%\)\s+0 \(0\.00%\)\s+5 \(41\.67%\)`, human)
	require.Contains(t, human, "current")
}
