package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
)

type pruneJSON struct {
	DryRun bool               `json:"dry_run"`
	Scopes []lease.PruneScope `json:"scopes"`
}

func (d *testDB) prune(args ...string) pruneJSON {
	d.t.Helper()
	out := d.ok(append([]string{"prune", "--json"}, args...)...)
	var r pruneJSON
	require.NoError(d.t, json.Unmarshal([]byte(out), &r), out)
	return r
}

// The history tables' row counts, to compare before and after.
func (d *testDB) historyCounts() map[string]int {
	d.t.Helper()
	m := map[string]int{}
	for _, table := range []string{"runs", "run_statuses", "run_diffs", "attempts", "task_message_logs", "tasks"} {
		m[table] = d.count(`SELECT count(*) FROM ` + table)
	}
	return m
}

// Prune keeps the last N runs (at least the current one and the last closed one) or those that
// ended after a date, of one corpus and service or of all, drops the older runs' history in
// every table, counts the same in a dry run, and leaves the current run untouched.
func TestPruneDropsTheHistoryOfOldRuns(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")

	// Corpus c: four runs of six tasks, each finished (two in Error, with a message).
	d.importList("c", "echo", entries("t", 6)...)
	sc := d.scope("c", "echo")
	var ids []int64
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT array_agg(id ORDER BY id) FROM tasks`).Scan(&ids))
	errs := map[int64]queue.Status{ids[0]: queue.StatusError, ids[1]: queue.StatusError}
	d.finish(sc, queue.StatusNoProblem, errs)
	for range 3 {
		d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo")
		d.finish(sc, queue.StatusNoProblem, errs)
	}
	// A message log left of an early run (as a late result would leave).
	_, err := d.pool.Exec(d.ctx, `INSERT INTO task_messages (task_id, run, severity, category, what) VALUES ($1, 1, 'error', 'late', 'x')`, ids[2])
	require.NoError(t, err)
	d.diff("--fold") // the kept matrix of the last closed run and the current one
	// Corpus c2: three runs of four tasks.
	d.importList("c2", "echo", entries("u", 4)...)
	sc2 := d.scope("c2", "echo")
	d.finish(sc2, queue.StatusNoProblem, nil)
	for range 2 {
		d.ok("rerun", "--yes", "--corpus", "c2", "--service", "echo")
		d.finish(sc2, queue.StatusNoProblem, nil)
	}
	require.Equal(t, 7, d.count(`SELECT count(*) FROM runs`))
	// Run 1 and 2 of c compared, kept in run_diffs.
	var cRuns []int64
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT array_agg(id ORDER BY id) FROM runs WHERE corpus_id = $1`, sc.CorpusID).Scan(&cRuns))
	d.diff("--from", itoa(cRuns[0]), "--to", itoa(cRuns[1]))
	require.Positive(t, d.count(`SELECT count(*) FROM run_diffs`))

	// Bad selections are usage errors.
	for _, args := range [][]string{{}, {"--keep", "1"}, {"--keep", "3", "--before", "2020-01-01"}, {"--before", "yesterday"}} {
		r := cortexq(t, d.env, append([]string{"prune"}, args...)...)
		require.Equal(t, 2, r.code, "prune %v: %s", args, r.stderr)
	}
	// What keep 2 drops of c: runs 1 and 2, their statuses (6 each), their matrix, the attempts
	// of task runs 1 and 2 (one each of six tasks), the late log.
	current := func() map[string]int {
		return map[string]int{
			"attempts": d.count(`SELECT count(*) FROM attempts a JOIN tasks t ON t.id = a.task_id AND t.run = a.run`),
			"logs":     d.count(`SELECT count(*) FROM task_message_logs m JOIN tasks t ON t.id = m.task_id AND t.run = m.run`),
		}
	}
	curBefore := current()
	require.Equal(t, 10, curBefore["attempts"])
	require.Equal(t, 2, curBefore["logs"])
	before := d.historyCounts()
	dry := d.prune("--keep", "2", "--corpus", "c", "--service", "echo", "--dry-run")
	require.True(t, dry.DryRun)
	require.Len(t, dry.Scopes, 1)
	want := lease.PruneScope{CorpusID: sc.CorpusID, ServiceID: sc.ServiceID, Corpus: "c", Service: "echo",
		KeptRuns: cRuns[2:], DroppedRuns: cRuns[:2], RunStatuses: 12,
		RunDiffs: int64(d.count(`SELECT count(*) FROM run_diffs`)), Attempts: 12, MessageLogs: 1}
	require.Equal(t, want, dry.Scopes[0])
	require.Equal(t, before, d.historyCounts(), "a dry run drops nothing")

	got := d.prune("--yes", "--keep", "2", "--corpus", "c", "--service", "echo")
	require.False(t, got.DryRun)
	require.Equal(t, dry.Scopes, got.Scopes, "the dry run counted what goes")
	after := d.historyCounts()
	require.Equal(t, before["runs"]-2, after["runs"])
	require.Equal(t, before["run_statuses"]-12, after["run_statuses"])
	require.Zero(t, after["run_diffs"])
	require.Equal(t, before["attempts"]-12, after["attempts"])
	require.Equal(t, before["task_message_logs"]-1, after["task_message_logs"])
	require.Equal(t, curBefore, current(), "the current run untouched")
	require.Equal(t, 3, d.count(`SELECT count(*) FROM runs WHERE corpus_id = $1`, sc2.CorpusID), "another corpus untouched")
	// The history left still reads: runs, the diff of the kept runs, a task's attempts.
	require.Contains(t, d.ok("runs", "--corpus", "c", "--service", "echo"), "corpus c, service echo: 2 runs")
	require.Equal(t, map[string]int64{"error → error": 2, "no_problem → no_problem": 4}, d.diff().matrix())
	require.Equal(t, map[string]int64{"error → error": 2, "no_problem → no_problem": 4}, d.diff("--fold").matrix())
	require.Contains(t, d.ok("task", "show", itoa(ids[0])), "accepted")

	// Again: nothing more to drop.
	again := d.prune("--yes", "--keep", "2", "--corpus", "c", "--service", "echo")
	require.Empty(t, again.Scopes[0].DroppedRuns)

	// --before a date long past drops nothing; one to come drops all but the last two runs of
	// every corpus and service (c2's first run), and the table says so.
	require.Empty(t, d.prune("--yes", "--before", "2000-01-01").Scopes[0].DroppedRuns)
	// Without --yes (or with --dry-run) it counts and drops nothing.
	require.True(t, d.prune("--before", "2999-01-01T00:00:00Z").DryRun)
	require.Equal(t, 3, d.count(`SELECT count(*) FROM runs WHERE corpus_id = $1`, sc2.CorpusID))
	r := cortexq(t, d.env, "prune", "--yes", "--dry-run", "--keep", "2")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "give --yes or --dry-run, not both")
	out := d.ok("prune", "--yes", "--before", "2999-01-01T00:00:00Z")
	require.Regexp(t, `(?m)^c2\s+echo\s+\d+ \d+\s+\d+\s+1\s+4\s+0\s+4\s+0\s*$`, out)
	require.Regexp(t, `(?m)^c\s+echo\s+\d+ \d+\s+0\s+0`, out)
	require.Equal(t, 2, d.count(`SELECT count(*) FROM runs WHERE corpus_id = $1`, sc2.CorpusID))
	require.Equal(t, curBefore, current(), "the current run untouched")
	require.Equal(t, before["tasks"], d.historyCounts()["tasks"])
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
