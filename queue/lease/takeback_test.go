package lease

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Operator actions on reserved tasks (docs/semantics.md#release): pause,
// rerun and deleting a task take reservations back from the replicas that hold them, and a
// hand-out of a reservation taken back records nothing.

// reserve reserves up to max tasks of the fixture's service for store s, requiring no error.
func (f *fixture) reserve(s *Store, max int) []Reserved {
	f.t.Helper()
	rs, err := s.Reserve(f.ctx, ReserveRequest{ServiceID: f.svc, Max: max})
	require.NoError(f.t, err)
	return rs
}

// sound requires every invariant of sql/audit/invariants.sql to hold.
func (f *fixture) sound() {
	f.t.Helper()
	bad, err := inspect.New(f.pool, nil).CheckInvariants(f.ctx)
	require.NoError(f.t, err)
	require.Empty(f.t, bad, "invariants")
}

// attempts counts a task's attempts rows.
func (f *fixture) attempts(id int64) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM attempts WHERE task_id = $1`, id).Scan(&n))
	return n
}

// reservedRetry makes a task whose lease to worker expired and was queued for a retry.
func (f *fixture) reservedRetry(worker string) int64 {
	f.t.Helper()
	id := f.leasedTo(worker)
	require.Equal(f.t, 1, f.reap().Requeued)
	return id
}

func TestTakeBack(t *testing.T) {
	t.Run("PauseTakesBackReservations", func(t *testing.T) {
		f := newFixture(t)
		retry := f.reservedRetry("w0")
		a, b, c := f.task(), f.task(), f.task()
		other := New(f.pool, Config{Replica: "r2", LeaseTimeout: testLease, NowFunc: f.clock.Now})
		elsewhere := f.service("elsewhere", 0)
		kept := f.taskOf(elsewhere)
		rs, err := other.Reserve(f.ctx, ReserveRequest{ServiceID: elsewhere, Max: 1})
		require.NoError(t, err)
		require.Len(t, rs, 1, "another service's task is reserved by r2")

		got := f.reserve(f.store, 3)
		require.Len(t, got, 3)
		require.Equal(t, []int64{retry, a, b}, []int64{got[0].TaskID, got[1].TaskID, got[2].TaskID},
			"the queued retry first, then TODO tasks")
		handed := got[1].HandOut("w1") // a: handed out, the worker not yet recorded
		f.sound()

		sum, err := f.store.Pause(f.ctx, Scope{CorpusID: f.corpus, ServiceID: f.svc})
		require.NoError(t, err)
		require.Equal(t, PauseSummary{Blocked: 3, Unreserved: 2, Requeued: 1}, sum)
		f.sound()
		for _, id := range []int64{a, b, c} {
			require.Equal(t, queue.StatusBlocked, f.status(id), "task %d", id)
			require.Empty(t, f.rows(id), "task %d keeps no row", id)
		}
		row := f.row(retry)
		require.Equal(t, StateSettling, row.State)
		require.True(t, row.Queued, "the reserved retry is queued again")
		require.Equal(t, []string{"w0"}, row.AttemptWorkers)
		require.Equal(t, StateReserved, f.row(kept).State, "another scope's reservation stays")
		still, err := f.store.StillReserved(f.ctx, []int64{retry, a, b})
		require.NoError(t, err)
		require.Empty(t, still)

		// The hand-out made before the pause: its attribution finds no reservation, and the
		// worker's result is unknown and records nothing.
		leases, err := f.store.Attribute(f.ctx, []HandOut{handed})
		require.NoError(t, err)
		require.Empty(t, leases)
		d := f.claim(a, "w1", queue.StatusNoProblem)
		require.Equal(t, OutcomeUnknown, d.Outcome, d.Reason)
		require.False(t, d.AttributedAtClaim)
		require.Equal(t, queue.StatusBlocked, f.status(a))
		require.Zero(t, f.attempts(a))
		require.Empty(t, f.rows(a))
		f.sound()

		// Nothing of the paused scope but the retry is reserved again.
		again := f.reserve(f.store, 5)
		require.Len(t, again, 1)
		require.Equal(t, retry, again[0].TaskID)
		require.True(t, again[0].Retry)
		f.sound()
	})

	t.Run("PauseTakesBackAReservationCommittingMeanwhile", func(t *testing.T) {
		f := newFixture(t)
		id, todo := f.task(), f.task()
		// A replica's reserve transaction, stopped before its commit: the task is locked, its
		// reserved row written and its status dispatched.
		tx, err := f.pool.Begin(f.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(f.ctx) }()
		_, err = tx.Exec(f.ctx, `SELECT id FROM tasks WHERE id = $1 FOR UPDATE`, id)
		require.NoError(t, err)
		now := f.clock.Now()
		doc, err := json.Marshal([]dbsqlc.Dispatch{{TaskID: id, Run: 1, State: StateReserved, AttemptWorkers: []string{},
			Deadline: now.Add(time.Minute), Replica: "r2", ServiceID: f.svc, LeaseTimeoutSeconds: 60, LeasedAt: now}})
		require.NoError(t, err)
		require.NoError(t, dispatchUpsert(f.ctx, tx, doc))
		_, err = tx.Exec(f.ctx, `UPDATE tasks SET status = 1 WHERE id = $1`, id)
		require.NoError(t, err)

		type paused struct {
			sum PauseSummary
			err error
		}
		done := make(chan paused, 1)
		go func() {
			sum, err := f.store.Pause(f.ctx, Scope{CorpusID: f.corpus, ServiceID: f.svc})
			done <- paused{sum, err}
		}()
		require.Eventually(t, func() bool {
			var waiting int
			require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%TaskPause%'`).Scan(&waiting))
			return waiting > 0
		}, 30*time.Second, 10*time.Millisecond, "the pause waits for the reserving transaction")
		require.NoError(t, tx.Commit(f.ctx))
		got := <-done
		require.NoError(t, got.err)
		require.Equal(t, PauseSummary{Blocked: 2, Unreserved: 1}, got.sum)
		for _, x := range []int64{id, todo} {
			require.Equal(t, queue.StatusBlocked, f.status(x), "task %d", x)
			require.Empty(t, f.rows(x), "task %d", x)
		}
		f.sound()
	})

	t.Run("RerunSettlesReservedRows", func(t *testing.T) {
		f := newFixture(t)
		retry := f.reservedRetry("w0")
		fresh := f.task()
		got := f.reserve(f.store, 2)
		require.Len(t, got, 2)
		require.Equal(t, retry, got[0].TaskID)
		require.Equal(t, fresh, got[1].TaskID)
		hs := []HandOut{got[0].HandOut("w1"), got[1].HandOut("w2")} // handed out, not yet recorded

		sum := f.rerun()
		require.Equal(t, RerunSummary{Tasks: 2, Settled: 1, Unreserved: 1}, sum)
		f.sound()
		require.Empty(t, f.rows(fresh), "the fresh reservation is deleted: nothing happened in it")
		row := f.row(retry)
		require.Equal(t, int32(1), row.Run)
		require.Equal(t, StateSettling, row.State, "the reserved retry is held for late results")
		require.False(t, row.Queued)
		var forgetAt bool
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT forget_at IS NOT NULL FROM dispatch WHERE task_id = $1`, retry).Scan(&forgetAt))
		require.True(t, forgetAt)

		leases, err := f.store.Attribute(f.ctx, hs)
		require.NoError(t, err)
		require.Empty(t, leases, "hand-outs of the old run are not attributed")
		// Results of the hand-outs record nothing: the fresh one's run has no row left, and the
		// retry's row is of an earlier run (as is a result of its earlier attempt's worker).
		require.Equal(t, OutcomeUnknown, f.claim(fresh, "w2", queue.StatusNoProblem).Outcome)
		for _, worker := range []string{"w1", "w0"} {
			d := f.claim(retry, worker, queue.StatusNoProblem)
			require.Equal(t, OutcomeStale, d.Outcome, worker)
			require.False(t, d.AttributedAtClaim, worker)
		}
		require.Zero(t, f.attempts(fresh))
		require.Equal(t, 1, f.attempts(retry))
		for _, id := range []int64{retry, fresh} {
			require.Equal(t, queue.StatusTODO, f.status(id))
		}
		f.sound()

		// The new run reserves both again, and never hands the retry to w0, who worked its
		// earlier run.
		again := f.reserve(f.store, 2)
		require.Len(t, again, 2)
		for _, r := range again {
			require.Equal(t, int32(2), r.Run, "task %d", r.TaskID)
			require.Zero(t, r.Attempt)
		}
		for _, r := range again {
			require.Equal(t, r.TaskID != retry, r.For("w0"), "task %d may go to w0", r.TaskID)
		}
		f.sound()
	})

	t.Run("DeletingATaskDropsItsReservation", func(t *testing.T) {
		f := newFixture(t)
		id := f.task()
		got := f.reserve(f.store, 1)
		require.Len(t, got, 1)
		h := got[0].HandOut("w0")

		_, err := f.pool.Exec(f.ctx, `DELETE FROM tasks WHERE id = $1`, id)
		require.NoError(t, err)
		var n int
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM dispatch WHERE task_id = $1`, id).Scan(&n))
		require.Zero(t, n, "the reservation went with its task")
		f.sound()
		still, err := f.store.StillReserved(f.ctx, []int64{id})
		require.NoError(t, err)
		require.Empty(t, still)
		leases, err := f.store.Attribute(f.ctx, []HandOut{h})
		require.NoError(t, err)
		require.Empty(t, leases)
		require.Equal(t, OutcomeUnknown, f.claim(id, "w0", queue.StatusNoProblem).Outcome)
		require.Zero(t, f.attempts(id))
		f.sound()
	})
}
