package lease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
)

// TestClaimWritingComesBeforeTheCommit pins the hook the dispatch claimers' relay hands on at:
// Writing runs after BeforeCommit, while the claim is still uncommitted, and a second claim
// (of other tasks) can read, decide and commit meanwhile.
func TestClaimWritingComesBeforeTheCommit(t *testing.T) {
	f := newFixture(t)
	first, second := f.leasedNowTo("w1"), f.leasedNowTo("w2")
	report := func(task int64, worker string) []Result {
		return []Result{{TaskID: task, Worker: worker, Kind: KindReport, Status: queue.StatusNoProblem}}
	}
	before := f.status(first)
	require.NotEqual(t, queue.StatusNoProblem, before)
	var steps []string
	ds, err := f.store.ClaimWithHooks(f.ctx, report(first, "w1"), ClaimHooks{
		BeforeCommit: func() error { steps = append(steps, "before_commit"); return nil },
		Writing: func(reads time.Duration) {
			steps = append(steps, "writing")
			require.Positive(t, reads, "the first round trip's time")
			require.Equal(t, before, f.status(first), "the first claim has not committed when it hands on")
			other, err := f.store.ClaimWithHooks(f.ctx, report(second, "w2"), ClaimHooks{})
			require.NoError(t, err, "a second claim runs while the first writes")
			require.Equal(t, OutcomeAccepted, other[0].Outcome)
			require.Equal(t, queue.StatusNoProblem, f.status(second))
		},
	})
	require.NoError(t, err)
	require.Equal(t, OutcomeAccepted, ds[0].Outcome)
	require.Equal(t, []string{"before_commit", "writing"}, steps)
	require.Equal(t, queue.StatusNoProblem, f.status(first))
}
