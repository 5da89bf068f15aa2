package lease

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Each replica's note of its demand returns the service's whole demand: its own rate and the
// other replicas' fresh notes, not notes older than DemandFresh, nor another service's.
func TestNoteDemandSumsTheReplicasFreshNotes(t *testing.T) {
	f := newFixture(t)
	other := f.service("other", 0)
	r2 := New(f.pool, Config{Replica: "r2", LeaseTimeout: testLease})
	r3 := New(f.pool, Config{Replica: "r3", LeaseTimeout: testLease})

	whole, err := f.store.NoteDemand(f.ctx, []int32{f.svc}, []float64{100})
	require.NoError(t, err)
	require.Equal(t, map[int32]float64{f.svc: 100}, whole, "alone, a replica's demand is the service's")

	whole, err = r2.NoteDemand(f.ctx, []int32{f.svc, other}, []float64{200, 7})
	require.NoError(t, err)
	require.Equal(t, map[int32]float64{f.svc: 300, other: 7}, whole)

	// r3's note is stale: older than DemandFresh, it is left out.
	_, err = r3.NoteDemand(f.ctx, []int32{f.svc}, []float64{1000})
	require.NoError(t, err)
	_, err = f.pool.Exec(f.ctx, "UPDATE service_demand SET seen_at = now() - interval '1 minute' WHERE replica = 'r3'")
	require.NoError(t, err)

	// A new note replaces the replica's last one.
	whole, err = f.store.NoteDemand(f.ctx, []int32{f.svc}, []float64{50})
	require.NoError(t, err)
	require.Equal(t, map[int32]float64{f.svc: 250}, whole)
	whole, err = r2.NoteDemand(f.ctx, []int32{f.svc}, []float64{0})
	require.NoError(t, err)
	require.Equal(t, map[int32]float64{f.svc: 50}, whole, "an idle replica notes 0")
}
