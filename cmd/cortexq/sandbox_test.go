package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
	"github.com/cortexq/cortexq/queue/api"
)

// A sandbox of a corpus's Error tasks runs on real replicas and workers, publishes
// <service>.sandbox-<id>.zip beside the sources, and leaves every result archive, task and
// message of the parent as it was; report, runs, status and pause take its name; delete takes
// its tasks and archives and nothing else.
func TestSandboxRunLeavesTheParentUntouched(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	const tasks = 12
	entries, err := bench.StageCorpus(d.ctx, t.TempDir(), tasks, 2048)
	require.NoError(t, err)
	d.importList("c", "echo", entries...)

	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	replica := d.start("serve", "--replica", "r-sandbox-test", "--ventilator", vent, "--sink", sink,
		"--http", fmt.Sprintf("127.0.0.1:%d", loopbackPort(t)), "--reap-interval", "500ms")
	worker := d.start("worker", "echo", "--service", "echo", "--ventilator", vent, "--sink", sink,
		"--identity", "w-sandbox-test", "--concurrency", "2", "--throttle", "100ms", "--io-timeout", "10s")
	require.Eventually(t, func() bool {
		return d.count(`SELECT count(*) FROM tasks WHERE status = -1`) == tasks
	}, time.Minute, 100*time.Millisecond, "the parent's tasks NoProblem; replica:\n%s", replica.log())

	// The parent's results hold bytes of their own (an echo result equals its source, as a
	// sandbox's would), and a third of its tasks are Error with a message to select them by.
	parent := map[string][]byte{}
	for i, e := range entries {
		p := filepath.Join(filepath.Dir(e), "echo.zip")
		parent[p] = []byte(fmt.Sprintf("the parent's result %d", i))
		require.NoError(t, os.WriteFile(p, parent[p], 0o644))
	}
	_, err = d.pool.Exec(d.ctx, `UPDATE tasks SET status = -3 WHERE id % 3 = 0`)
	require.NoError(t, err)
	_, err = d.pool.Exec(d.ctx, `INSERT INTO task_messages (task_id, run, severity, category, what, details)
		SELECT id, run, 'error', 'undefined', '\foo', 'line 1' FROM tasks WHERE status = -3`)
	require.NoError(t, err)
	errored := d.count(`SELECT count(*) FROM tasks WHERE status = -3`)
	require.Positive(t, errored)
	parentMessages := d.count(`SELECT count(*) FROM task_messages`)

	out := d.ok("sandbox", "create", "sb", "--from", "c", "--service", "echo",
		"--severity", "error", "--category", "undefined", "--what", `\foo`)
	require.Contains(t, out, fmt.Sprintf("%d tasks copied as TODO", errored))
	var sbID int32
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT id FROM corpora WHERE name = 'sb'`).Scan(&sbID))
	require.Contains(t, out, fmt.Sprintf("echo.sandbox-%d.zip", sbID))
	require.Eventually(t, func() bool {
		return d.count(`SELECT count(*) FROM tasks WHERE corpus_id = $1 AND status = -1`, sbID) == errored
	}, time.Minute, 100*time.Millisecond, "the sandbox's tasks NoProblem; replica:\n%s", replica.log())

	sandboxArchives := func() []string {
		var out []string
		for _, e := range entries {
			p := filepath.Join(filepath.Dir(e), fmt.Sprintf("echo.sandbox-%d.zip", sbID))
			if _, err := os.Stat(p); err == nil {
				out = append(out, p)
			}
		}
		return out
	}
	parentUntouched := func() {
		t.Helper()
		for p, want := range parent {
			got, err := os.ReadFile(p)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "%s changed", p)
		}
		require.Equal(t, errored, d.count(`SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id
			WHERE c.name = 'c' AND t.status = -3`))
		require.Equal(t, tasks-errored, d.count(`SELECT count(*) FROM tasks t JOIN corpora c ON c.id = t.corpus_id
			WHERE c.name = 'c' AND t.status = -1`))
		require.Equal(t, parentMessages, d.count(`SELECT count(*) FROM task_messages m JOIN tasks t ON t.id = m.task_id
			JOIN corpora c ON c.id = t.corpus_id WHERE c.name = 'c'`))
	}
	parentUntouched()
	archives := sandboxArchives()
	require.Len(t, archives, errored)
	for _, p := range archives {
		src, err := os.ReadFile(filepath.Join(filepath.Dir(p), "source.zip"))
		require.NoError(t, err)
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, src, got, "the sandbox's echo result of %s", p)
	}

	// The sandbox is a corpus to the other commands.
	out = d.ok("report", "--corpus", "sb", "--service", "echo")
	require.Regexp(t, fmt.Sprintf(`(?m)^no_problem\s+%d\s+100\.00%%`, errored), out)
	var rs api.Runs
	require.NoError(t, json.Unmarshal([]byte(d.ok("runs", "--corpus", "sb", "--service", "echo", "--json")), &rs))
	runs := rs.Runs
	require.Len(t, runs, 1)
	require.Equal(t, "sandbox of c", runs[0].Note)
	require.Contains(t, d.ok("status", "--corpus", "sb"), "sb")
	require.Contains(t, d.ok("pause", "--corpus", "sb", "--service", "echo"), "0 TODO tasks blocked")
	out = d.ok("rerun", "--yes", "--corpus", "sb", "--service", "echo")
	require.Contains(t, out, fmt.Sprintf("%d tasks back to TODO", errored))
	require.Eventually(t, func() bool {
		return d.count(`SELECT count(*) FROM tasks WHERE corpus_id = $1 AND status = -1`, sbID) == errored
	}, time.Minute, 100*time.Millisecond, "the sandbox's rerun NoProblem; replica:\n%s", replica.log())
	parentUntouched()
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+sb\s+c\s+\S+ \S+ UTC\s+%d\s*$`, sbID, errored), d.ok("sandbox", "list"))

	require.Equal(t, 0, worker.stop(syscall.SIGTERM, 30*time.Second), worker.log())
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second), replica.log())
	out = d.ok("sandbox", "delete", "sb")
	require.Contains(t, out, fmt.Sprintf("dry run: sandbox sb: its %d tasks, its runs and their result archives would be deleted; nothing changed", errored))
	require.Len(t, sandboxArchives(), errored)
	require.Equal(t, errored, d.count(`SELECT count(*) FROM tasks WHERE corpus_id = $1`, sbID))
	out = d.ok("sandbox", "delete", "sb", "--yes")
	require.Contains(t, out, fmt.Sprintf("sandbox sb deleted: %d tasks, %d result archives", errored, errored))
	require.Empty(t, sandboxArchives())
	parentUntouched()
	require.Equal(t, tasks, d.count(`SELECT count(*) FROM tasks`))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM runs WHERE corpus_id = $1`, sbID))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = a.task_id)`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM corpora`))
	require.Contains(t, d.ok("sandbox", "list"), "0 sandboxes")
}
