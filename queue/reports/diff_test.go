package reports

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
)

// diffKey is one cell of a diff matrix: -128 stands for "new" (no task in the earlier run).
type diffKey struct{ from, to int16 }

func matrixOf(cells []DiffCell) map[diffKey]int64 {
	out := map[diffKey]int64{}
	for _, c := range cells {
		k := diffKey{from: -128, to: int16(c.To)}
		if c.From != nil {
			k.from = int16(*c.From)
		}
		out[k] += c.Tasks
	}
	return out
}

// bruteDiff counts a diff matrix over the rows themselves, in Go: each task of the later run (the
// corpus and service's tasks for the current one) by its status in the earlier run.
func (f *fixture) bruteDiff(d DiffRuns) map[diffKey]int64 {
	f.t.Helper()
	statuses := func(sql string, args ...any) map[int64]int16 {
		rows, err := f.pool.Query(f.ctx, sql, args...)
		require.NoError(f.t, err)
		defer rows.Close()
		out := map[int64]int16{}
		for rows.Next() {
			var id int64
			var st int16
			require.NoError(f.t, rows.Scan(&id, &st))
			out[id] = st
		}
		require.NoError(f.t, rows.Err())
		return out
	}
	from := statuses(`SELECT task_id, status FROM run_statuses WHERE run_id = $1`, d.From)
	var to map[int64]int16
	if d.To == 0 {
		to = statuses(`SELECT id, status FROM tasks WHERE corpus_id = $1 AND service_id = $2`, d.CorpusID, d.ServiceID)
	} else {
		to = statuses(`SELECT task_id, status FROM run_statuses WHERE run_id = $1`, d.To)
	}
	out := map[diffKey]int64{}
	for id, st := range to {
		k := diffKey{from: -128, to: st}
		if fs, ok := from[id]; ok {
			k.from = fs
		}
		out[k]++
	}
	return out
}

// requireDiffsEqualBrute checks the matrix of every pair of runs of the fixture's corpus (the
// last closed run and the current one read from diff_current, the others counted or kept),
// and that the pair the fold keeps is read from diff_current.
func (f *fixture) requireDiffsEqualBrute(when string) {
	f.t.Helper()
	sc := queue.Scope{CorpusID: f.corpus, ServiceID: f.svc}
	runs, err := f.rep.Runs(f.ctx, sc)
	require.NoError(f.t, err)
	for i := range runs {
		for j := i + 1; j < len(runs); j++ {
			if runs[i].EndedAt == nil {
				continue
			}
			d := DiffRuns{Scope: sc, From: runs[i].ID}
			if runs[j].EndedAt != nil {
				d.To = runs[j].ID
			}
			for range 2 { // counted, then kept
				cells, swept, err := f.rep.DiffMatrixSwept(f.ctx, d)
				require.NoError(f.t, err)
				require.Equal(f.t, f.bruteDiff(d), matrixOf(cells), "%s: diff of runs %d and %d", when, runs[i].ID, runs[j].ID)
				if d.To == 0 && j == i+1 {
					require.NotNil(f.t, swept, "%s: the current diff is read from diff_current", when)
				}
			}
			if d.To == 0 && j == i+1 || j == i+1 && rng(d.From) {
				f.requireDiffCellsEqualBrute(d, when)
			}
		}
	}
}

// rng picks some pairs of closed runs for the (slower) check of every cell.
func rng(run int64) bool { return run%2 == 0 }

// requireDiffCellsEqualBrute checks that each cell of a diff (and an empty one) lists exactly
// its tasks, by id.
func (f *fixture) requireDiffCellsEqualBrute(d DiffRuns, when string) {
	f.t.Helper()
	want := map[diffKey][]int64{}
	rows, err := f.pool.Query(f.ctx, `
		SELECT t.id, coalesce(fr.status, -128)::smallint, t.status
		FROM (SELECT id, status FROM tasks WHERE $2 = 0 AND corpus_id = $3 AND service_id = $4
		      UNION ALL SELECT task_id, status FROM run_statuses WHERE $2 <> 0 AND run_id = $2) AS t
		LEFT JOIN run_statuses fr ON fr.run_id = $1 AND fr.task_id = t.id
		ORDER BY t.id`, d.From, d.To, d.CorpusID, d.ServiceID)
	require.NoError(f.t, err)
	for rows.Next() {
		var id int64
		var k diffKey
		require.NoError(f.t, rows.Scan(&id, &k.from, &k.to))
		want[k] = append(want[k], id)
	}
	require.NoError(f.t, rows.Err())
	want[diffKey{from: int16(queue.StatusNoProblem), to: int16(queue.StatusBlocked)}] = nil // empty (no pause here)
	for k, ids := range want {
		var from *queue.Status
		if k.from != -128 {
			st := queue.Status(k.from)
			from = &st
		}
		tasks, err := f.rep.DiffCellTasks(f.ctx, d, from, queue.Status(k.to), ReportMaxLimit, 0)
		require.NoError(f.t, err)
		var got []int64
		for _, x := range tasks {
			got = append(got, x.TaskID)
		}
		require.Equal(f.t, ids, got, "%s: cell %d → %d of runs %d and %d", when, k.from, k.to, d.From, d.To)
	}
}

// The kept diff matrices equal a brute-force count over run_statuses and tasks, for random
// histories: conversions leaving tasks in flight, reruns of random slices, tasks added after a
// run closed, results folded in through the fold's notes alone (sweeps held off) and then with
// the sweeps, and a sandbox converted and deleted.
func TestKeptDiffEqualsBruteForce(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f := newFixture(t)
			rng := rand.New(rand.NewPCG(seed, 12))
			for range 30 + rng.IntN(20) {
				f.task()
			}
			finals := []queue.Status{queue.StatusNoProblem, queue.StatusWarning, queue.StatusError, queue.StatusFatal, queue.StatusInvalid}
			convert := func(leaveInFlight bool) {
				for round := 0; round < 100; round++ {
					leases := f.lease("w0", "w1", "w2", "w3")
					if len(leases) == 0 {
						return
					}
					for _, l := range leases {
						if leaveInFlight && rng.IntN(8) == 0 {
							continue
						}
						f.accepted(l.TaskID, l.Worker, finals[rng.IntN(len(finals))])
					}
					if leaveInFlight {
						return
					}
				}
			}
			foldAll := func() {
				_, err := f.rep.FoldAll(f.ctx, 1+rng.IntN(20))
				require.NoError(t, err)
			}
			convert(false)
			foldAll()
			for step := range 5 {
				scope := lease.RerunScope{CorpusID: f.corpus, ServiceID: f.svc}
				if rng.IntN(3) > 0 {
					scope.Statuses = []queue.Status{finals[rng.IntN(len(finals))], finals[rng.IntN(len(finals))]}
				}
				if _, err := f.store.Rerun(f.ctx, scope); err != nil {
					require.NoError(t, err)
				}
				for range rng.IntN(4) {
					f.task() // new in the current run
				}
				convert(true)
				foldAll() // the reset after the rerun
				f.requireDiffsEqualBrute(fmt.Sprintf("step %d, after the rerun", step))

				// More results, folded through the notes alone: no sweep is due.
				_, err := f.pool.Exec(f.ctx, `UPDATE diff_current_state SET next_sweep_at = 'infinity'`)
				require.NoError(t, err)
				convert(false)
				sum, err := f.rep.FoldReports(f.ctx, 1+rng.IntN(20))
				require.NoError(t, err)
				require.False(t, sum.Busy)
				f.requireDiffsEqualBrute(fmt.Sprintf("step %d, results folded", step))

				// Leases change statuses without notes: the sweep of a forced fold counts them.
				convert(true)
				foldAll()
				f.requireDiffsEqualBrute(fmt.Sprintf("step %d, swept", step))
			}

			sb, err := f.rep.CreateSandbox(f.ctx, "sb", lease.RerunScope{CorpusID: f.corpus, ServiceID: f.svc}, 0)
			require.NoError(t, err)
			convert(false)
			_, err = f.store.Rerun(f.ctx, lease.RerunScope{CorpusID: sb.ID, ServiceID: f.svc})
			require.NoError(t, err)
			convert(true)
			foldAll()
			f.requireDiffsEqualBrute("beside a sandbox")
			_, err = f.rep.DeleteSandbox(f.ctx, "sb")
			require.NoError(t, err)
			foldAll()
			var left int
			require.NoError(t, f.pool.QueryRow(f.ctx, `
				SELECT (SELECT count(*) FROM diff_current WHERE corpus_id = $1) + (SELECT count(*) FROM run_diffs WHERE corpus_id = $1)
				     + (SELECT count(*) FROM diff_current_state WHERE corpus_id = $1)`, sb.ID).Scan(&left))
			require.Zero(t, left, "diff rows of a deleted sandbox")
			f.requireDiffsEqualBrute("after the sandbox's deletion")
		})
	}
}
