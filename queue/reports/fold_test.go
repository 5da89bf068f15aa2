package reports

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
)

// bruteReport counts the category and what levels of a status over the rows themselves: the
// messages of the status's severity in the current runs of the corpus's tasks with the status,
// and (for Fatal) the tasks with none of them as the category no_messages.
func (f *fixture) bruteReport(corpus int32, st queue.Status) (cats map[string]ReportRow, whats map[string]map[string]ReportRow) {
	f.t.Helper()
	sev, _ := queue.StatusSeverity(st)
	rows, err := f.pool.Query(f.ctx, `
		SELECT t.id, m.Category::text, m.What::text
		FROM tasks t JOIN task_messages m ON m.Task_id = t.id AND m.run = t.run AND m.severity = $3
		WHERE t.corpus_id = $1 AND t.service_id = $2 AND t.status = $4`, corpus, f.svc, string(sev), int16(st))
	require.NoError(f.t, err)
	type msg struct {
		Task           int64
		Category, What string
	}
	msgs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[msg])
	require.NoError(f.t, err)
	cats, whats = map[string]ReportRow{}, map[string]map[string]ReportRow{}
	catTasks, whatTasks := map[string]map[int64]bool{}, map[[2]string]map[int64]bool{}
	withAny := map[int64]bool{}
	for _, m := range msgs {
		withAny[m.Task] = true
		if catTasks[m.Category] == nil {
			catTasks[m.Category] = map[int64]bool{}
			whats[m.Category] = map[string]ReportRow{}
		}
		k := [2]string{m.Category, m.What}
		if whatTasks[k] == nil {
			whatTasks[k] = map[int64]bool{}
		}
		catTasks[m.Category][m.Task], whatTasks[k][m.Task] = true, true
		c, w := cats[m.Category], whats[m.Category][m.What]
		c.Name, c.Messages, c.Tasks = m.Category, c.Messages+1, int64(len(catTasks[m.Category]))
		w.Name, w.Messages, w.Tasks = m.What, w.Messages+1, int64(len(whatTasks[k]))
		cats[m.Category], whats[m.Category][m.What] = c, w
	}
	if st == queue.StatusFatal {
		var fatal int64
		require.NoError(f.t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM tasks WHERE corpus_id = $1 AND service_id = $2 AND status = -4`,
			corpus, f.svc).Scan(&fatal))
		if n := fatal - int64(len(withAny)); n > 0 {
			cats[queue.NoMessages] = ReportRow{Name: queue.NoMessages, Tasks: n}
		}
	}
	return cats, whats
}

// folded reads the category and what levels of every final status from the rollups.
func (f *fixture) folded(corpus int32) map[queue.Status][]ReportRow {
	f.t.Helper()
	out := map[queue.Status][]ReportRow{}
	for _, st := range []queue.Status{queue.StatusNoProblem, queue.StatusWarning, queue.StatusError, queue.StatusFatal, queue.StatusInvalid} {
		sev, _ := queue.StatusSeverity(st)
		sl := Slice{Scope: queue.Scope{CorpusID: corpus, ServiceID: f.svc}, Status: st, Severity: sev, Limit: ReportMaxLimit}
		cats, total, err := f.rep.ReportCategories(f.ctx, sl)
		require.NoError(f.t, err)
		require.Equal(f.t, int64(len(cats)), total)
		out[st] = cats
		for _, c := range cats {
			sl.Category = c.Name
			ws, total, err := f.rep.ReportWhats(f.ctx, sl)
			require.NoError(f.t, err)
			require.Equal(f.t, int64(len(ws)), total)
			for _, w := range ws {
				out[st] = append(out[st], ReportRow{Name: c.Name + "/" + w.Name, Tasks: w.Tasks, Messages: w.Messages})
			}
		}
	}
	return out
}

// requireFoldedEqualsBrute checks every category and what of every final status of a corpus.
func (f *fixture) requireFoldedEqualsBrute(corpus int32, when string) {
	f.t.Helper()
	got := f.folded(corpus)
	for st, rows := range got {
		cats, whats := f.bruteReport(corpus, st)
		gotCats, gotWhats := map[string]ReportRow{}, map[string]map[string]ReportRow{}
		for _, r := range rows {
			if c, w, ok := cutSlash(r.Name); ok {
				if c == queue.NoMessages {
					continue
				}
				if gotWhats[c] == nil {
					gotWhats[c] = map[string]ReportRow{}
				}
				gotWhats[c][w] = ReportRow{Name: w, Tasks: r.Tasks, Messages: r.Messages}
			} else {
				gotCats[r.Name] = r
			}
		}
		require.Equal(f.t, cats, gotCats, "%s: categories of status %s", when, st)
		require.Equal(f.t, whats, gotWhats, "%s: whats of status %s", when, st)
	}
	f.requireAllEqualsBrute(corpus, when)
	f.requireMessagesEqualBrute(corpus, when)
}

// requireAllEqualsBrute checks the all-tasks levels (every severity, category and what) of a
// corpus against a count over the messages of the current runs of its tasks, whatever their
// status.
func (f *fixture) requireAllEqualsBrute(corpus int32, when string) {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `
		SELECT m.severity::text, m.category::text, m.what::text, count(DISTINCT t.id), count(*)
		FROM tasks t JOIN task_messages m ON m.task_id = t.id AND m.run = t.run
		WHERE t.corpus_id = $1 AND t.service_id = $2
		GROUP BY GROUPING SETS ((1), (1, 2), (1, 2, 3))`, corpus, f.svc)
	require.NoError(f.t, err)
	type count struct {
		Severity       string
		Category, What *string
		Tasks, Msgs    int64
	}
	counts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[count])
	require.NoError(f.t, err)
	want := map[string]ReportRow{}
	for _, c := range counts {
		key := c.Severity
		if c.Category != nil {
			key += "/" + *c.Category
		}
		if c.What != nil {
			key += "/" + *c.What
		}
		want[key] = ReportRow{Tasks: c.Tasks, Messages: c.Msgs}
	}
	got := map[string]ReportRow{}
	scope := queue.Scope{CorpusID: corpus, ServiceID: f.svc}
	sevs, err := f.rep.ReportAllSeverities(f.ctx, scope)
	require.NoError(f.t, err)
	for sev, r := range sevs {
		if r.Tasks > 0 {
			got[string(sev)] = ReportRow{Tasks: r.Tasks, Messages: r.Messages}
		}
		sl := Slice{Scope: scope, Severity: sev, Limit: ReportMaxLimit}
		cats, total, err := f.rep.ReportAllNames(f.ctx, sl)
		require.NoError(f.t, err)
		require.Equal(f.t, int64(len(cats)), total)
		for _, c := range cats {
			got[string(sev)+"/"+c.Name] = ReportRow{Tasks: c.Tasks, Messages: c.Messages}
			sl.Category = c.Name
			ws, total, err := f.rep.ReportAllNames(f.ctx, sl)
			require.NoError(f.t, err)
			require.Equal(f.t, int64(len(ws)), total)
			for _, w := range ws {
				got[string(sev)+"/"+c.Name+"/"+w.Name] = ReportRow{Tasks: w.Tasks, Messages: w.Messages}
			}
		}
	}
	require.Equal(f.t, want, got, "%s: all-tasks levels", when)
}

// requireMessagesEqualBrute checks the messages level of every what, by status and of all
// tasks, both ways to its tasks (through the GIN index and walking), paged three at a time,
// against the messages of the current runs listed from the logs.
func (f *fixture) requireMessagesEqualBrute(corpus int32, when string) {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `
		SELECT t.status, m.severity::text, m.category::text, m.what::text,
		       array_agg(t.id ORDER BY t.id, m.id), array_agg(m.details::text ORDER BY t.id, m.id)
		FROM tasks t JOIN task_messages m ON m.task_id = t.id AND m.run = t.run
		WHERE t.corpus_id = $1 AND t.service_id = $2
		GROUP BY GROUPING SETS ((2, 3, 4), (1, 2, 3, 4))`, corpus, f.svc)
	require.NoError(f.t, err)
	type list struct {
		Status                   *int16
		Severity, Category, What string
		Tasks                    []int64
		Details                  []string
	}
	lists, err := pgx.CollectRows(rows, pgx.RowToStructByPos[list])
	require.NoError(f.t, err)
	for _, l := range lists {
		for _, walk := range []int64{0, 1 << 40} {
			sl := Slice{Scope: queue.Scope{CorpusID: corpus, ServiceID: f.svc}, Severity: queue.Severity(l.Severity),
				Category: l.Category, What: l.What, Limit: 3}
			var gotTasks []int64
			var gotDetails []string
			for page := 0; page <= len(l.Tasks)/3; page++ {
				sl.Offset = page * 3
				ms, err := f.rep.kindMessages(f.ctx, sl, l.Status, walk)
				require.NoError(f.t, err)
				require.LessOrEqual(f.t, len(ms), 3)
				for _, m := range ms {
					gotTasks, gotDetails = append(gotTasks, m.ID), append(gotDetails, m.Details)
					if l.Status != nil {
						require.Equal(f.t, *l.Status, m.Status)
					}
				}
			}
			require.Equal(f.t, l.Tasks, gotTasks, "%s: tasks of %+v (walk above %d)", when, l, walk)
			require.Equal(f.t, l.Details, gotDetails, "%s: details of %+v (walk above %d)", when, l, walk)
		}
	}
}

func cutSlash(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// The rollups a fold leaves equal a brute-force count over the rows, for random histories of
// real claims (messages of every severity, Fatal tasks without messages, tasks left in flight),
// reruns of random slices, a prune, and a sandbox converted and deleted; between folds the reports stay
// as of the last fold, with the changes pending.
func TestFoldedReportEqualsBruteForce(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f := newFixture(t)
			rng := rand.New(rand.NewPCG(seed, 11))
			for range 30 + rng.IntN(20) {
				f.task()
			}
			finals := []queue.Status{queue.StatusNoProblem, queue.StatusWarning, queue.StatusError, queue.StatusFatal, queue.StatusInvalid}
			sevs := []queue.Severity{queue.SeverityInfo, queue.SeverityWarning, queue.SeverityError, queue.SeverityFatal, queue.SeverityInvalid}
			cats, whats := []string{"undefined", "missing_file", "latex"}, []string{`\foo`, "x.sty", "all"}
			convert := func() {
				// lease.Lease every TODO task (of any corpus) and answer most of them.
				for round := 0; round < 100; round++ {
					leases := f.lease("w0", "w1", "w2", "w3")
					if len(leases) == 0 {
						return
					}
					for _, l := range leases {
						if rng.IntN(10) == 0 {
							continue // left in flight
						}
						i := rng.IntN(len(finals))
						r := lease.Result{TaskID: l.TaskID, Worker: l.Worker, Kind: lease.KindReport, Status: finals[i]}
						for range rng.IntN(5) {
							sev := sevs[i]
							if rng.IntN(3) == 0 {
								sev = sevs[rng.IntN(len(sevs))]
							}
							r.Messages = append(r.Messages, queue.Message{Severity: sev,
								Category: cats[rng.IntN(len(cats))], What: whats[rng.IntN(len(whats))],
								Details: fmt.Sprintf("d%d", len(r.Messages))})
						}
						require.Equal(t, lease.OutcomeAccepted, f.reply(r, nil).Outcome)
					}
				}
			}
			fold := func() {
				_, err := f.rep.FoldAll(f.ctx, 1+rng.IntN(20)) // small batches: many transactions
				require.NoError(t, err)
			}
			convert()
			fold()
			f.requireFoldedEqualsBrute(f.corpus, "first conversion")
			for step := range 4 {
				// A rerun of a random slice, then conversions; the reports stay as they were
				// until the next fold.
				before := f.folded(f.corpus)
				scope := lease.RerunScope{CorpusID: f.corpus, ServiceID: f.svc}
				switch rng.IntN(3) {
				case 0:
					scope.Statuses = []queue.Status{finals[rng.IntN(len(finals))]}
				case 1:
					scope.Statuses = []queue.Status{queue.StatusError}
					scope.Severity, scope.Category = string(queue.SeverityError), cats[rng.IntN(len(cats))]
				}
				_, err := f.store.Rerun(f.ctx, scope)
				require.NoError(t, err)
				convert()
				require.Equal(t, before, f.folded(f.corpus), "step %d: reports as of the last fold", step)
				st, err := f.rep.ReportFoldState(f.ctx)
				require.NoError(t, err)
				require.NotNil(t, st.FoldedAt)
				fold()
				f.requireFoldedEqualsBrute(f.corpus, fmt.Sprintf("step %d", step))
			}
			// A prune drops the history of the runs before the last two: the current runs'
			// logs, and so the rollups, stay.
			_, err := f.store.PruneRuns(f.ctx, lease.PruneOptions{CorpusID: f.corpus, ServiceID: f.svc, Keep: lease.MinKeep})
			require.NoError(t, err)
			fold()
			f.requireFoldedEqualsBrute(f.corpus, "after a prune")

			// A sandbox: converted, folded, deleted, folded: nothing of it is left in the
			// rollups, and the parent's counts are untouched.
			sb, err := f.rep.CreateSandbox(f.ctx, "sb", lease.RerunScope{CorpusID: f.corpus, ServiceID: f.svc}, catalog.SandboxPriority)
			require.NoError(t, err)
			convert()
			fold()
			f.requireFoldedEqualsBrute(sb.ID, "sandbox")
			f.requireFoldedEqualsBrute(f.corpus, "parent of a sandbox")
			_, err = f.rep.DeleteSandbox(f.ctx, "sb")
			require.NoError(t, err)
			fold()
			var left int
			require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM report_rollup WHERE corpus_id = $1`, sb.ID).Scan(&left))
			require.Zero(t, left, "rollup rows of a deleted sandbox")
			require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM report_all_rollup WHERE corpus_id = $1`, sb.ID).Scan(&left))
			require.Zero(t, left, "all-tasks rollup rows of a deleted sandbox")
			// The fold drops every row it brings to zero (reruns took from many of them).
			require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT (SELECT count(*) FROM report_rollup WHERE tasks = 0 AND messages = 0)
				+ (SELECT count(*) FROM report_all_rollup WHERE tasks = 0 AND messages = 0)`).Scan(&left))
			require.Zero(t, left, "rollup rows counting nothing")
			require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM report_folded WHERE corpus_id = $1`, sb.ID).Scan(&left))
			require.Zero(t, left)
			f.requireFoldedEqualsBrute(f.corpus, "after the sandbox's deletion")
			st, err := f.rep.ReportFoldState(f.ctx)
			require.NoError(t, err)
			require.Zero(t, st.Pending)
		})
	}
}

// A fold that finds another one running folds nothing and says so; claims and reruns go on
// while a fold's transaction is open.
func TestFoldTakesTurns(t *testing.T) {
	f := newFixture(t)
	for range 4 {
		f.task()
	}
	for _, l := range f.lease("w0", "w1") {
		f.accepted(l.TaskID, l.Worker, queue.StatusError)
	}
	tx, err := f.pool.Begin(f.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(f.ctx) }()
	var locked bool
	require.NoError(t, tx.QueryRow(f.ctx, `SELECT pg_try_advisory_xact_lock(hashtext('cortexq report fold'))`).Scan(&locked))
	require.True(t, locked)
	sum, err := f.rep.FoldReports(f.ctx, 0)
	require.NoError(t, err)
	require.True(t, sum.Busy)
	require.Zero(t, sum.Tasks)
	// The writers do not wait for the lock holder.
	for _, l := range f.lease("w2", "w3") {
		f.accepted(l.TaskID, l.Worker, queue.StatusWarning)
	}
	f.rerun()
	require.NoError(t, tx.Rollback(f.ctx))
	sum, err = f.rep.FoldAll(f.ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(4), sum.Tasks)
	f.requireFoldedEqualsBrute(f.corpus, "after the rerun")
}

// The paced fold (the periodic one beside live claims) folds all the notes, a small batch at a
// time with rests between, to the same rollups as one fold.
func TestFoldPacedFoldsEverything(t *testing.T) {
	f := newFixture(t)
	for range 5 {
		f.task()
	}
	for _, l := range f.lease("w0", "w1", "w2") {
		f.accepted(l.TaskID, l.Worker, queue.StatusError)
	}
	sum, err := f.rep.FoldPaced(f.ctx, 1)
	require.NoError(t, err)
	require.Equal(t, int64(3), sum.Tasks)
	require.GreaterOrEqual(t, sum.Batches, 3)
	f.requireFoldedEqualsBrute(f.corpus, "paced")
	var left int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM report_changes`).Scan(&left))
	require.Zero(t, left)
}
