package dispatch

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
)

// TestStopMidLoadDrainsInOrder stops a replica's group (Server.Run's) while workers are busy,
// without a Drain first, and checks what the order of the group promises: the ventilator stops
// first and gives its stock back, the receiver stops taking results before the writers stop,
// and the writers before the claimers, so that every result the sink took is claimed and
// committed, no reservation is left to the stock, and no temp archive is left. What the workers
// still had is the reaper's: another replica then finishes every task.
func TestStopMidLoadDrainsInOrder(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := newEnv(t, withClock(clock), func(_ *lease.Config, d *Config) { d.Writers, d.Claimers = 1, 1 })
	ids := e.stage(200, 400_000)
	stats, stopWorkers := e.workers(16)
	eventually(t, "results committed, more on their way", func() bool {
		return e.counts()[queue.StatusNoProblem] >= 30
	})

	// Stopped while the writer is behind the receiver: the writer's stop must wait for it to
	// place what the receiver took, and the claimers', after it, for every item it handed them
	// (had the claimers stopped first, the writer would send on their closed input).
	eventually(t, "the writer behind the receiver", func() bool { return len(e.server.sink.inbox) >= 8 })
	e.stop() // mid-load: the group stops in reverse order while results keep coming
	stopWorkers()
	require.Greater(t, stats.Pushed.Load(), uint64(0))

	// No result lost: every result the receiver took was claimed, and every claim accepted is
	// a committed row.
	require.Zero(t, e.server.hot.Replied(), "every result the sink took was claimed")
	require.Zero(t, e.server.claims.parsedBytes.Load(), "no parsed report waits for a claim")
	accepted := counterValue(e.server.metrics.claims.WithLabelValues(string(lease.OutcomeAccepted)))
	done := e.counts()[queue.StatusNoProblem]
	require.Equal(t, float64(done), accepted, "each accepted claim is a committed result")
	require.Less(t, done, len(ids), "stopped mid-load: tasks were left")

	// No lease left with the stock: the ventilator gave back what it had reserved and not handed
	// out, and the attributor recorded the hand-outs, before the leasers and the database stopped.
	require.Zero(t, e.server.stocks.len(), "the stock is empty")
	var reserved int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM dispatch WHERE state = 'reserved'`).Scan(&reserved))
	require.Zero(t, reserved, "no reservation is left to the stopped replica")
	temps, err := filepath.Glob(filepath.Join(e.dir, "*", ".*.tmp-*"))
	require.NoError(t, err)
	require.Empty(t, temps, "no temp archive is left behind")

	// What was handed out and not answered is retried: past the leases, the reaper takes it
	// back and another replica finishes every task.
	clock.Advance(2 * time.Minute)
	e.reap()
	r2 := e.replica("r2", nil)
	e.vent, e.sink = r2.vent, r2.sink
	e.echoAll(4, false, ids)
}

// TestDrainOrderIsTheGroupsReverse: the worker-facing side stops in the reverse of its parts'
// order, which is the drain order docs/architecture.md describes; reordering the parts must
// change this test and that text together.
func TestDrainOrderIsTheGroupsReverse(t *testing.T) {
	t.Parallel()
	s, err := New(Deps{Store: lease.New(nil, lease.Config{Replica: "r1"})}, Config{})
	require.NoError(t, err)
	var stops []string
	parts := s.parts(context.Background(), func(error) {}, func() bool { return false })
	for i := len(parts) - 1; i >= 0; i-- {
		stops = append(stops, parts[i].name)
	}
	require.Equal(t, []string{
		"ventilator",      // no more hand-outs; the stock given back through the leasers
		"attributor",      // the hand-outs' workers written
		"receiver",        // no more results taken; the writers' inbox closed
		"writers",         // every result taken placed and handed to the claimers
		"claimers",        // every result handed to them claimed
		"upkeep",          // the hot mirror's resyncs
		"outage watch",    // the outage budget watched until the last claim
		"worker counters", // their last flush after the last claim
		"bind", "curve", "sink socket", "ventilator sockets", "zmq",
	}, stops)
}
