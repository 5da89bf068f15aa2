package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
)

// TestBenchFleetChurn: a fleet of 300 identities, each a DEALER of its own with a request
// outstanding, churning to 1,200 distinct identities over 1,200 tasks, against one replica:
// every task NoProblem, every request answered, every identity slot served, and once the fleet
// left no table of the replica keeps an entry for any identity (cortexq_identity_entries).
// The full size (10,000 identities, 1,000,000 distinct) is a benchmark: docs/performance.md.
func TestBenchFleetChurn(t *testing.T) {
	d := newTestDB(t)
	out := d.ok("bench", "--fleet", "300", "--churn", "1200", "--tasks", "1200", "--payload-kb", "1",
		"--fleet-throttle", "200ms", "--deadline", "3m", "--json", "--dir", t.TempDir())
	var rep bench.FleetReport
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &rep), out)
	require.True(t, rep.GatesOK, out)
	require.Equal(t, int64(1200), rep.NoProblem, out)
	require.Zero(t, rep.Lost, out)
	require.Zero(t, rep.Unanswered, out)
	require.Zero(t, rep.Starved, out)
	require.GreaterOrEqual(t, rep.Distinct, int64(1200), out)
	require.Equal(t, 300, rep.Connected, out)
	require.GreaterOrEqual(t, rep.SlotMin, int64(1), out)
	require.GreaterOrEqual(t, rep.TaskReplies, int64(1200), out)
	require.Positive(t, rep.PeakRSS, out)
	for _, table := range []string{"waiting", "asking", "asking_key", "capped", "hot_workers", "hot_keys"} {
		require.Contains(t, rep.EntriesLeft, table, out)
		require.Zero(t, rep.EntriesLeft[table], "table %s after the fleet left: %s", table, out)
		// Connected, the tables hold at most one entry per identity connected now.
		require.LessOrEqual(t, rep.EntriesConnected[table], 300.0, out)
	}
}
