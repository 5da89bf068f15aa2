package lease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
)

// TestClaimOfReservedTaskRecordsItsOutcome: a result for a task handed out and not yet
// attributed (the replica died in between, or its attribution is still to come) records the
// attempt at the claim, and that attempt carries the result's outcome, status and answer time
// like any other; the late attribution of the hand-out is skipped.
func TestClaimOfReservedTaskRecordsItsOutcome(t *testing.T) {
	f := newFixture(t)
	id := f.task()
	rs, err := f.store.Reserve(f.ctx, ReserveRequest{ServiceID: f.svc, Max: 1})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, id, rs[0].TaskID)

	d := f.claim(id, "w1", queue.StatusNoProblem)
	require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)
	require.True(t, d.AttributedAtClaim)
	var (
		attempts int
		outcome  *string
		status   *int16
		answered *time.Time
		worker   string
	)
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) OVER (), outcome, status, answered_at, worker
		FROM attempts WHERE task_id = $1`, id).Scan(&attempts, &outcome, &status, &answered, &worker))
	require.Equal(t, 1, attempts)
	require.Equal(t, "w1", worker)
	require.NotNil(t, outcome, "the attempt recorded at the claim has an outcome")
	require.Equal(t, "accepted", *outcome)
	require.NotNil(t, status)
	require.Equal(t, int16(queue.StatusNoProblem), *status)
	require.NotNil(t, answered)
	require.Equal(t, queue.StatusNoProblem, f.status(id))

	got, err := f.store.Attribute(f.ctx, []HandOut{rs[0].HandOut("w1")})
	require.NoError(t, err)
	require.Empty(t, got, "the hand-out's attribution, after the claim, is skipped")
	require.Zero(t, int(f.mustCount(`SELECT count(*) FROM attempts WHERE task_id = $1 AND outcome IS NULL`, id)))
}

func (f *fixture) mustCount(query string, args ...any) int64 {
	f.t.Helper()
	var n int64
	require.NoError(f.t, f.pool.QueryRow(f.ctx, query, args...).Scan(&n))
	return n
}

// TestKeyHoldsNoAttemptOfAReservedTask: under CURVE the sink lets a result through to a claim
// only when its key holds an attempt of the task (KeyHoldsAttempt) or the replica's hot mirror
// has the task handed to that key. A reserved task not yet attributed has no attempt on record,
// so a result for it reaching any replica but the one that handed it out is dropped as
// not_holder: no key gets a result recorded for a task it was not handed, and a hand-out whose
// replica died before attributing it is worked again after the reservation deadline.
func TestKeyHoldsNoAttemptOfAReservedTask(t *testing.T) {
	f := newFixture(t)
	id := f.task()
	rs, err := f.store.Reserve(f.ctx, ReserveRequest{ServiceID: f.svc, Max: 1})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, id, rs[0].TaskID)
	held, err := f.store.KeyHoldsAttempt(f.ctx, id, "fleet")
	require.NoError(t, err)
	require.False(t, held, "a reserved task, not attributed: no key holds an attempt of it")

	_, err = f.store.Attribute(f.ctx, []HandOut{rs[0].HandOut(KeyedWorker("fleet", "w1"))})
	require.NoError(t, err)
	held, err = f.store.KeyHoldsAttempt(f.ctx, id, "fleet")
	require.NoError(t, err)
	require.True(t, held, "attributed to a worker of the key")
	held, err = f.store.KeyHoldsAttempt(f.ctx, id, "other")
	require.NoError(t, err)
	require.False(t, held, "another key")
}
