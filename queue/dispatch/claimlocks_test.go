package dispatch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/lease"
)

func claimBatch(ids ...int64) []*item {
	b := make([]*item, len(ids))
	for i, id := range ids {
		b[i] = &item{result: lease.Result{TaskID: id}}
	}
	return b
}

// TestClaimLocksKeepClaimsOffEachOthersTasks: a claim of a task another claim holds waits for
// it to end; claims of other tasks do not.
func TestClaimLocksKeepClaimsOffEachOthersTasks(t *testing.T) {
	t.Parallel()
	var l claimLocks
	first := l.lock(claimBatch(3, 1, 3))
	other := l.lock(claimBatch(2, 4)) // disjoint: taken at once
	l.unlock(other)

	var order []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		held := l.lock(claimBatch(5, 1))
		order = append(order, "second")
		l.unlock(held)
	}()
	order = append(order, "first") // before the unlock: the second claim cannot be in yet
	l.unlock(first)
	<-done
	require.Equal(t, []string{"first", "second"}, order)
	require.Empty(t, l.held, "every task released")
}
