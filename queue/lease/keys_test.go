package lease

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
)

// keyed claims a result authenticated with key, from the worker of that key called worker.
func (f *fixture) keyed(id int64, key, worker string, kind Kind, status queue.Status) Decision {
	return f.reply(Result{TaskID: id, Key: key, Worker: KeyedWorker(key, worker), Kind: kind, Status: status}, nil)
}

func TestKeyedClaim(t *testing.T) {
	t.Run("HolderIsAccepted", func(t *testing.T) {
		f := newFixture(t)
		f.task()
		l := f.leaseOne(KeyedWorker("alice", "w1"))
		d := f.keyed(l.TaskID, "alice", "w1", KindReport, queue.StatusNoProblem)
		require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)
		require.Equal(t, queue.StatusNoProblem, f.status(l.TaskID))
	})

	t.Run("AnotherKeyIsNotHolderAndChangesNothing", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo(KeyedWorker("alice", "w1"))
		// The same self-chosen worker name under another key, and a plain (unkeyed) name that
		// the reference's rule would attribute to the newest attempt.
		for _, r := range []Result{
			{TaskID: id, Key: "mallory", Worker: KeyedWorker("mallory", "w1"), Kind: KindReport, Status: queue.StatusNoProblem},
			{TaskID: id, Key: "mallory", Worker: KeyedWorker("alice", "w1"), Kind: KindReport, Status: queue.StatusNoProblem},
			{TaskID: id, Key: "mallory", Worker: "w1", Kind: KindRetryable, Status: queue.StatusFatal, Messages: timeoutCause()},
			{TaskID: id, Key: "mallory", Worker: "w1", Kind: KindUnusable},
		} {
			d := f.reply(r, nil)
			require.Equal(t, OutcomeNotHolder, d.Outcome, "%+v", r)
		}
		require.Equal(t, queue.StatusDispatched, f.status(id))
		row := f.row(id)
		require.Equal(t, StateInFlight, row.State)
		require.False(t, row.Answered, "an unusable reply of a non-holder does not mark the task answered")
		var outcome *string
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT outcome FROM attempts WHERE task_id = $1`, id).Scan(&outcome))
		require.Nil(t, outcome, "the holder's attempt has no outcome yet")
		require.NoError(t, f.store.FlushWorkers(f.ctx))
		var n int
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM workers WHERE name LIKE 'key:mallory/%' OR name = 'w1'`).Scan(&n))
		require.Zero(t, n, "a non-holder is not counted as a worker with results")

		// The holder still answers, and is counted.
		d := f.keyed(id, "alice", "w1", KindReport, queue.StatusWarning)
		require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)
		require.NoError(t, f.store.FlushWorkers(f.ctx))
		var results int64
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT results FROM workers WHERE name = 'key:alice/w1'`).Scan(&results))
		require.Equal(t, int64(1), results)
	})

	t.Run("OtherProcessOfTheKeyGoesToTheKeysNewestAttempt", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo(KeyedWorker("alice", "w1"), KeyedWorker("bob", "w2"), KeyedWorker("alice", "w3"), KeyedWorker("bob", "w4"))
		d := f.keyed(id, "alice", "w9", KindReport, queue.StatusNoProblem)
		require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)
		require.Equal(t, 2, d.Attempt, "alice's newest attempt, not the task's newest")
		require.Equal(t, LateOlderAttempt, d.Late)
	})

	t.Run("ExactWorkerGetsItsOwnAttempt", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo(KeyedWorker("alice", "w1"), KeyedWorker("alice", "w2"))
		d := f.keyed(id, "alice", "w1", KindReport, queue.StatusNoProblem)
		require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)
		require.Equal(t, 0, d.Attempt)
	})

	t.Run("EarlierRunOfTheKeyIsStale", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo(KeyedWorker("alice", "w1"))
		f.rerun()
		leases := f.lease(KeyedWorker("bob", "w2"))
		require.Len(t, leases, 1)
		require.Equal(t, id, leases[0].TaskID)
		require.Equal(t, OutcomeStale, f.keyed(id, "alice", "w1", KindReport, queue.StatusNoProblem).Outcome)
		require.Equal(t, OutcomeNotHolder, f.keyed(id, "carol", "w1", KindReport, queue.StatusNoProblem).Outcome)
		require.Equal(t, OutcomeAccepted, f.keyed(id, "bob", "w2", KindReport, queue.StatusNoProblem).Outcome)
	})

	t.Run("UnknownTaskStaysUnknown", func(t *testing.T) {
		f := newFixture(t)
		id := f.task()
		require.Equal(t, OutcomeUnknown, f.keyed(id, "alice", "w1", KindReport, queue.StatusNoProblem).Outcome)
		require.Equal(t, OutcomeUnknown, f.keyed(id+1000, "alice", "w1", KindReport, queue.StatusNoProblem).Outcome)
	})

	t.Run("PlainReplyOfAnUnrecordedWorkerCountsAsTheNewestAttempt", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w1", "w2")
		d := f.claim(id, "stranger", queue.StatusNoProblem)
		require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)
		require.Equal(t, 1, d.Attempt)
	})
}

func TestKeyOfWorker(t *testing.T) {
	for _, tt := range []struct{ worker, key string }{
		{KeyedWorker("alice", "w1"), "alice"},
		{KeyedWorker("fleet-a", "host/with/slashes"), "fleet-a"},
		{"w1", ""},
		{"key:no-slash", ""},
	} {
		require.Equal(t, tt.key, KeyOfWorker(tt.worker), tt.worker)
	}
}
