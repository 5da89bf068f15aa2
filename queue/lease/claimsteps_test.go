package lease

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
)

func reportOf(task int64, worker string) []Result {
	return []Result{{TaskID: task, Worker: worker, Kind: KindReport, Status: queue.StatusNoProblem}}
}

// requireIdle requires every connection of the fixture's pool given back, none closed for a
// transaction left open.
func (f *fixture) requireIdle(what string) {
	f.t.Helper()
	st := f.pool.Stat()
	require.Zero(f.t, st.AcquiredConns(), "%s: no connection held", what)
	require.Positive(f.t, st.IdleConns(), "%s: the claim's connection is back in the pool", what)
}

// TestClaimStepsCommitOnlyAtCommit pins the steps the dispatch claimers' relay hands on
// between: after BeginClaim and the publishes the claim is uncommitted, and a second claim (of
// other tasks) can begin, decide and commit meanwhile.
func TestClaimStepsCommitOnlyAtCommit(t *testing.T) {
	f := newFixture(t)
	first, second := f.leasedNowTo("w1"), f.leasedNowTo("w2")
	before := f.status(first)
	require.NotEqual(t, queue.StatusNoProblem, before)
	c, err := f.store.BeginClaim(f.ctx, reportOf(first, "w1"), nil)
	require.NoError(t, err)
	defer c.Rollback()
	pubs := c.ToPublish
	require.Len(t, pubs, 1, "the accepted result is to be published")
	require.Equal(t, OutcomeAccepted, pubs[0].Outcome)
	require.Positive(t, c.Reads, "the first round trip's time")
	require.Equal(t, before, f.status(first), "the first claim has not committed when it hands on")

	other, err := f.store.Claim(f.ctx, reportOf(second, "w2"), nil)
	require.NoError(t, err, "a second claim runs while the first is open")
	require.Equal(t, OutcomeAccepted, other[0].Outcome)
	require.Equal(t, queue.StatusNoProblem, f.status(second))

	ds, err := c.Commit(f.ctx, nil)
	require.NoError(t, err)
	require.Equal(t, OutcomeAccepted, ds[0].Outcome)
	require.Equal(t, queue.StatusNoProblem, f.status(first))
	c.Rollback() // after the commit: nothing
	f.requireIdle("after the commit")
	require.Equal(t, queue.StatusNoProblem, f.status(first))
}

// TestClaimRollbackEndsTheTransaction: a caller that stops after BeginClaim rolls back; nothing
// is written, the rows' locks are gone (another claim decides the task at once), and the
// connection is back in the pool, idle. A Commit after it fails.
func TestClaimRollbackEndsTheTransaction(t *testing.T) {
	f := newFixture(t)
	id := f.leasedNowTo("w1")
	before := f.row(id)
	c, err := f.store.BeginClaim(f.ctx, reportOf(id, "w1"), nil)
	require.NoError(t, err)
	require.Len(t, c.ToPublish, 1)
	c.Rollback()
	c.Rollback() // twice: nothing more
	f.requireIdle("after the rollback")
	require.Equal(t, before, f.row(id), "nothing written")
	_, err = c.Commit(f.ctx, nil)
	require.ErrorIs(t, err, errTxEnded)
	require.False(t, RolledBack(err), "a step after the end is the caller's error, not the server's word")

	d := f.claim(id, "w1", queue.StatusWarning)
	require.Equal(t, OutcomeAccepted, d.Outcome, "the rows are not held")
	require.Equal(t, queue.StatusWarning, f.status(id))
	f.requireIdle("after the second claim")
}

// TestClaimPublishFailureWritesNothingOfTheResult: the writes of an accepted result are made
// only once its publish succeeded; a failed one leaves the task as it was, and the other
// results of the claim stand.
func TestClaimPublishFailureWritesNothingOfTheResult(t *testing.T) {
	f := newFixture(t)
	failed, kept := f.leasedNowTo("w1"), f.leasedNowTo("w2")
	before := f.row(failed)
	c, err := f.store.BeginClaim(f.ctx, append(reportOf(failed, "w1"), reportOf(kept, "w2")...), nil)
	require.NoError(t, err)
	defer c.Rollback()
	pubs := c.ToPublish
	require.Len(t, pubs, 2)
	ds, err := c.Commit(f.ctx, map[*Decision]error{pubs[0]: errors.New("disk full")})
	require.NoError(t, err)
	require.Equal(t, OutcomePublishFail, ds[0].Outcome)
	require.Equal(t, "disk full", ds[0].Reason)
	require.Equal(t, OutcomeAccepted, ds[1].Outcome)
	require.Equal(t, before, f.row(failed), "the row as it was")
	require.NotEqual(t, queue.StatusNoProblem, f.status(failed))
	require.Equal(t, queue.StatusNoProblem, f.status(kept))
	f.requireIdle("after the commit")
}

// TestClaimRefusesTwoResultsOfOneTask: the second result's decision would depend on the first's
// publish, so a claim takes one result per task; the refusal begins no transaction.
func TestClaimRefusesTwoResultsOfOneTask(t *testing.T) {
	f := newFixture(t)
	id := f.leasedNowTo("w1", "w2")
	before := f.row(id)
	_, err := f.store.BeginClaim(f.ctx, append(reportOf(id, "w1"), reportOf(id, "w2")...), nil)
	require.ErrorIs(t, err, errTaskTwice)
	f.requireIdle("after the refusal")
	require.Equal(t, before, f.row(id))

	// The test helper claims them one after the other, as the dispatch claimers batch them.
	ds, err := f.store.Claim(f.ctx, append(reportOf(id, "w1"), reportOf(id, "w2")...), nil)
	require.NoError(t, err)
	require.Equal(t, []Outcome{OutcomeAccepted, OutcomeAccepted}, []Outcome{ds[0].Outcome, ds[1].Outcome})
	require.Equal(t, LateOlderAttempt, ds[0].Late)
	require.Equal(t, LateNewerAttempt, ds[1].Late, "the second decided against the first's commit")
}
