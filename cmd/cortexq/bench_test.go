package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
)

// TestBenchReportsItsOwnClusterAndBatches: a short bench with --vs-river reports PostgreSQL's
// CPU per task counted on the test cluster alone (its postmaster named), River's beside it,
// the cost of its own drain checks (left out of PostgreSQL's), and the replicas' average lease
// and claim batches (at least one request or reply each); the text output says the same.
func TestBenchReportsItsOwnClusterAndBatches(t *testing.T) {
	d := newTestDB(t)
	dir := t.TempDir()
	out := d.ok("bench", "--tasks", "60", "--workers", "2", "--payload-kb", "1", "--vs-river", "--json", "--dir", dir)
	var rep bench.Report
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &rep), out)
	require.True(t, rep.GatesOK, out)
	require.Contains(t, rep.PostgresCPU, "the --database-url server's processes only (postmaster pid ", out)
	require.Contains(t, rep.CPUMicrosPerTask, "postgres", out)
	require.GreaterOrEqual(t, rep.CPUMicrosPerTask["postgres"], 0.0, out)
	require.Contains(t, rep.RiverCPUMicrosPerJob, "postgres", out)
	require.GreaterOrEqual(t, rep.RiverCPUMicrosPerJob["postgres"], 0.0, out)
	require.Positive(t, rep.DrainPolls, out)
	require.GreaterOrEqual(t, rep.DrainPollMicrosPerTask, 0.0, out)
	require.GreaterOrEqual(t, rep.ReserveBatchAvg, 1.0, out)
	// Each hand-out is attributed by a statement or by its result's claim.
	require.True(t, rep.AttributeBatchAvg >= 1 || rep.AttributedAtClaim > 0, out)
	require.LessOrEqual(t, rep.AttributedAtClaim, 1.0, out)
	require.GreaterOrEqual(t, rep.ClaimBatchAvg, 1.0, out)
	require.LessOrEqual(t, rep.ClaimBatchAvg, 60.0, out)
	// The fold after the drain: what the replicas had not folded, its time counted after the
	// drain's.
	require.LessOrEqual(t, rep.FoldTasks, int64(60), out)
	require.Positive(t, rep.TasksPerSecondWithFold, out)
	require.LessOrEqual(t, rep.TasksPerSecondWithFold, rep.TasksPerSecond, out)
	for _, key := range []string{`"reserve_batch_avg":`, `"attributed_at_claim":`, `"claim_batch_avg":`, `"river_cpu_us_per_job":`, `"postgres_cpu":`,
		`"drain_poll_pg_cpu_us_per_task":`, `"fold_tasks":`, `"fold_seconds":`, `"tasks_per_s_with_fold":`} {
		require.Contains(t, out, key)
	}

	text := d.ok("bench", "--tasks", "20", "--workers", "2", "--payload-kb", "1", "--dir", dir)
	require.Contains(t, text, "average batch: reserve ", text)
	require.Contains(t, text, "PostgreSQL CPU: the --database-url server's processes only", text)
	require.Contains(t, text, "report fold after the drain: ", text)
	// The stage table ends it (docs/stages.md): the bench's echo workers report no stages of their own.
	require.Contains(t, text, "where the time went", text)
	require.Regexp(t, `(?m)^claim\s+20\s`, text)
	require.Regexp(t, `(?m)^20 tasks in .*papers/s; bottleneck: `, text)
	require.Contains(t, out, `"stage_bytes_per_task":`)
}

// TestBenchCorpora: --corpora makes a backlog per corpus (the big one's tail in the database
// alone), stops once --tasks results are recorded, finishes the small corpus beside the big
// one's backlog and says when; what is left of the backlogs is deleted afterwards.
func TestBenchCorpora(t *testing.T) {
	d := newTestDB(t)
	out := d.ok("bench", "--corpora", "5000,20", "--tasks", "200", "--workers", "2", "--payload-kb", "1",
		"--max-in-flight", "100", "--json", "--dir", t.TempDir())
	var rep bench.Report
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &rep), out)
	require.True(t, rep.GatesOK, out)
	require.Len(t, rep.Corpora, 2, out)
	big, small := rep.Corpora[0], rep.Corpora[1]
	require.Equal(t, 5000, big.Tasks)
	require.Nil(t, big.FinishedSeconds, "the backlog is not drained")
	require.GreaterOrEqual(t, big.NoProblem+small.NoProblem, int64(200), "at least --tasks converted")
	require.Equal(t, int64(20), small.NoProblem)
	require.NotNil(t, small.FinishedSeconds, out)
	require.Positive(t, *small.FinishedSeconds)
	require.Zero(t, d.count(`SELECT count(*) FROM tasks WHERE status >= 0`), "the backlogs' rest is deleted")

	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"--corpora", "10,x"}, `--corpora "10,x": want TODO tasks per corpus`},
		{[]string{"--corpora", "0"}, `--corpora "0": want`},
		{[]string{"--corpora", "10", "--tasks", "11"}, "--tasks 11: more than the 10 tasks of --corpora"},
	} {
		r := cortexq(t, d.env, append([]string{"bench", "--dir", t.TempDir()}, bad.args...)...)
		require.Equal(t, 2, r.code, "%v: %s", bad.args, r.stderr)
		require.Contains(t, r.stderr, bad.says, "%v", bad.args)
	}
}
