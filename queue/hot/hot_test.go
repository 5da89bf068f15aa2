package hot

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
)

// task is a mirrored task with only its id set.
func task(id int64) Task { return Task{Task: queue.Task{TaskID: id}} }

// leasedTo is a mirrored task leased to worker, authenticated with key ("" in plain mode).
func leasedTo(id int64, worker, key string) Task {
	return Task{Task: queue.Task{TaskID: id}, Worker: worker, Key: key}
}

func TestMap(t *testing.T) {
	tests := []struct {
		name string
		ops  func(m *Map)
		want int
	}{
		{"Empty", func(m *Map) {}, 0},
		{"PutCounts", func(m *Map) { m.Put(task(1)); m.Put(task(2)) }, 2},
		{"RePutDoesNotDoubleCount", func(m *Map) { m.Put(task(7)); m.Put(Task{Task: queue.Task{TaskID: 7, Run: 2}}) }, 1},
		{"DeleteMissingIsNoOp", func(m *Map) { m.Put(task(7)); m.Delete(8); m.Delete(-1) }, 1},
		{"DeleteTwiceDoesNotUnderflow", func(m *Map) { m.Put(task(7)); m.Delete(7); m.Delete(7) }, 0},
		{"ResetReplaces", func(m *Map) {
			m.Put(task(1))
			m.Put(task(2))
			m.Reset([]Task{task(2), task(3), task(4)}, m.Generation())
		}, 3},
		{"ResetKeepsTasksPutAfterTheSnapshot", func(m *Map) {
			m.Put(task(1))
			since := m.Generation()
			m.Put(task(2)) // leased while the snapshot was read
			m.Reset(nil, since)
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			tt.ops(m)
			require.Equal(t, tt.want, m.Len())
			n := 0
			m.tasks.Range(func(int64, Task) bool { n++; return true })
			require.Equal(t, n, m.Len(), "the counter equals the map's size")
		})
	}
}

func TestMapHeld(t *testing.T) {
	tests := []struct {
		name       string
		ops        func(m *Map)
		a, b, keyK int // tasks held by workers a and b, and by key k
	}{
		{"PutCountsTheWorkerAndKey", func(m *Map) {
			m.Put(leasedTo(1, "a", "k"))
			m.Put(leasedTo(2, "a", "k"))
			m.Put(leasedTo(3, "b", ""))
		}, 2, 1, 2},
		{"RePutMovesTheTaskToItsNewWorker", func(m *Map) {
			m.Put(leasedTo(1, "a", "k"))
			m.Put(leasedTo(1, "b", ""))
		}, 0, 1, 0},
		{"DeleteUncounts", func(m *Map) {
			m.Put(leasedTo(1, "a", "k"))
			m.Delete(1)
			m.Delete(1)
		}, 0, 0, 0},
		{"ResetUncountsLeasesGoneFromTheDatabase", func(m *Map) {
			m.Put(leasedTo(1, "a", "k")) // expired, or answered through another replica
			m.Put(leasedTo(2, "a", "k"))
			m.Reset([]Task{leasedTo(2, "a", "k"), leasedTo(3, "b", "")}, m.Generation())
		}, 1, 1, 1},
		{"AnsweredUncountsOnceAndStaysMirrored", func(m *Map) {
			m.Put(leasedTo(1, "a", "k"))
			m.Put(leasedTo(2, "a", "k"))
			m.Answered(1, "a")
			m.Answered(1, "a") // twice counts once
			m.Answered(2, "b") // another worker's reply leaves a's lease counted
			m.Answered(9, "a") // not mirrored
			if _, ok := m.Get(1); !ok {
				panic("an answered task stays mirrored until its claim")
			}
			m.Delete(1) // its claim: not uncounted twice
		}, 1, 0, 1},
		{"ResetKeepsAnAnsweredTaskUncounted", func(m *Map) {
			m.Put(leasedTo(1, "a", ""))
			m.Answered(1, "a")
			m.Put(leasedTo(1, "a", "")) // re-put (a resync or a new lease) counts it anew
			m.Answered(1, "a")
			m.Reset([]Task{leasedTo(1, "a", "")}, m.Generation())
		}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			tt.ops(m)
			require.Equal(t, tt.a, m.Held("a"))
			require.Equal(t, tt.b, m.Held("b"))
			require.Equal(t, tt.keyK, m.HeldByKey("k"))
		})
	}
}

func TestMapConcurrent(t *testing.T) {
	m := New()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() { m.Put(task(int64(i % 150))) })
	}
	wg.Wait()
	require.Equal(t, 150, m.Len())
	for i := range 200 {
		wg.Go(func() { m.Delete(int64(i % 150)) })
	}
	wg.Wait()
	require.Zero(t, m.Len())
}

func BenchmarkMapPutDelete(b *testing.B) {
	m := New()
	b.RunParallel(func(pb *testing.PB) {
		i := int64(0)
		for pb.Next() {
			m.Put(task(i))
			m.Delete(i)
			i++
		}
	})
}

// TestRepliedCountsAnsweredTasksUntilTheirClaim: Replied is the sink's backlog, the answered
// tasks still mirrored; a re-put, a delete and a reset keep it exact.
func TestRepliedCountsAnsweredTasksUntilTheirClaim(t *testing.T) {
	m := New()
	m.Put(leasedTo(1, "a", ""))
	m.Put(leasedTo(2, "a", ""))
	m.Put(leasedTo(3, "b", ""))
	require.Zero(t, m.Replied())
	m.Answered(1, "a")
	m.Answered(1, "a") // a repeat counts once
	m.Answered(3, "c") // another worker's reply does not count
	require.Equal(t, 1, m.Replied())
	require.Equal(t, 1, m.Held("a"))
	m.Answered(2, "a")
	require.Equal(t, 2, m.Replied())
	m.Delete(1) // claimed
	require.Equal(t, 1, m.Replied())
	m.Put(leasedTo(2, "a", "")) // leased anew (a retry): unanswered again
	require.Zero(t, m.Replied())
	m.Answered(2, "a")
	m.Reset([]Task{leasedTo(3, "b", "")}, m.Generation()) // 2 was claimed through another replica
	require.Zero(t, m.Replied())
	require.Equal(t, 1, m.Len())
}

// TestNamesForgetWorkersWithNothingHeld: a fleet that churns through many identities leaves no
// name behind: a worker or key is counted only while it holds an unanswered lease.
func TestNamesForgetWorkersWithNothingHeld(t *testing.T) {
	m := New()
	for i := range int64(10000) {
		w := "w" + string(rune('a'+i%26)) + string(rune(i))
		m.Put(leasedTo(i, w, "k"+w))
		if i%2 == 0 {
			m.Answered(i, w) // answered: waits for its claim, no longer held
		} else {
			m.Delete(i) // claimed, or reset away
		}
		workers, keys := m.Names()
		require.LessOrEqual(t, workers, 1)
		require.LessOrEqual(t, keys, 1)
	}
	workers, keys := m.Names()
	require.Zero(t, workers)
	require.Zero(t, keys)
	m.Put(leasedTo(20000, "x", "kx"))
	workers, keys = m.Names()
	require.Equal(t, 1, workers)
	require.Equal(t, 1, keys)
	m.Reset(nil, m.Generation())
	workers, keys = m.Names()
	require.Zero(t, workers)
	require.Zero(t, keys)
}
