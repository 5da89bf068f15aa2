package dispatch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/lease"
)

// A claim takes one result per task (lease.Store.BeginClaim): gather holds a result of a task
// already in its batch for the next batch any claimer gathers, in the order results came, and a
// closed input still gives the held ones their batches.
func TestGatherHoldsASecondResultOfATask(t *testing.T) {
	t.Parallel()
	s := &claimers{core: &core{cfg: Config{ClaimBatch: 3}}}
	in := make(chan *item, 10)
	mk := func(task int64, worker string) *item {
		return &item{result: lease.Result{TaskID: task, Worker: worker}}
	}
	sent := []*item{mk(1, "a"), mk(2, "a"), mk(1, "b"), mk(3, "a"), mk(1, "c"), mk(4, "a"), mk(0, "x"), mk(0, "y")}
	for _, it := range sent {
		in <- it
	}
	names := func(batch []*item) []string {
		var out []string
		for _, it := range batch {
			out = append(out, string(rune('0'+it.result.TaskID))+it.result.Worker)
		}
		return out
	}
	batch := s.gather(in, nil, 0)
	require.Equal(t, []string{"1a", "2a", "3a"}, names(batch))
	require.Equal(t, []string{"1b"}, names(s.later))
	// The next batch, of whichever claimer, takes the held one first.
	batch = s.gather(in, nil, 0)
	require.Equal(t, []string{"1b", "4a", "0x"}, names(batch), "results of no known task are not held")
	require.Equal(t, []string{"1c"}, names(s.later))
	close(in)
	batch = s.gather(in, batch[:0], 0)
	require.Equal(t, []string{"1c", "0y"}, names(batch))
	require.Empty(t, s.later)
	batch = s.gather(in, batch[:0], 0)
	require.Empty(t, batch, "the input closed, nothing held: the claimer ends")
	require.Empty(t, s.later)
}
