package lease

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Fair share across the corpora of a service (docs/semantics.md#fair-share), asserted by lease
// counts, never by time.

// fairBatch is the reservation batch of these tests: one Lease of fairBatch workers.
const fairBatch = 64

// corpusWith makes a corpus holding n TODO tasks of the fixture's service, inserted in one
// statement (ids in entry order), and returns its id.
func (f *fixture) corpusWith(name string, n int) int32 {
	f.t.Helper()
	c, err := dbsqlc.New(f.pool).CorpusCreate(f.ctx, name, "/"+name, nil)
	require.NoError(f.t, err)
	f.addTasks(c.ID, n)
	return c.ID
}

func (f *fixture) addTasks(corpus int32, n int) {
	f.t.Helper()
	_, err := f.pool.Exec(f.ctx, `INSERT INTO tasks (service_id, corpus_id, entry)
		SELECT $1, $2, c.path || '/' || g || '/' || $4::bigint || '.zip'
		FROM corpora c, generate_series(1, $3::int) g WHERE c.id = $2 ORDER BY g`, f.svc, corpus, n, f.seq.Add(1))
	require.NoError(f.t, err)
}

func (f *fixture) setShare(corpus int32, weight, priority int32) {
	f.t.Helper()
	_, _, err := f.catalog().SetShare(f.ctx, Scope{CorpusID: corpus, ServiceID: f.svc}, &weight, &priority)
	require.NoError(f.t, err)
}

// leaseBatch leases up to n tasks (one Lease, n workers named after the batch) and counts them
// by corpus.
func (f *fixture) leaseBatch(n int) (map[int32]int, []Lease) {
	f.t.Helper()
	workers := make([]string, n)
	seq := f.seq.Add(1)
	for i := range workers {
		workers[i] = fmt.Sprintf("w%d-%d", seq, i)
	}
	leases := f.leaseOf(f.svc, 0, workers...)
	by := map[int32]int{}
	for _, l := range leases {
		by[l.CorpusID]++
	}
	return by, leases
}

func TestFairShare(t *testing.T) {
	t.Run("SmallCorpusImportedLaterIsLeasedWithinFewBatches", func(t *testing.T) {
		f := newFixture(t)
		big := f.corpusWith("big", 20_000)
		for range 5 {
			by, _ := f.leaseBatch(fairBatch)
			require.Equal(t, fairBatch, by[big])
		}
		small := f.corpusWith("small", 100)
		// Equal weights: each batch of N after the import gives the small corpus at least N/2 - 1
		// (it joins level with the big one, a stride behind at most), so its 100 tasks are all
		// leased within ceil(100 / (N/2 - 1)) batches: 4 of 64.
		const bound = (100 + fairBatch/2 - 2) / (fairBatch/2 - 1)
		got, batches := 0, 0
		for got < 100 {
			require.Less(t, batches, bound, "the small corpus's 100 tasks are leased within %d batches of %d", bound, fairBatch)
			by, leases := f.leaseBatch(fairBatch)
			require.Len(t, leases, fairBatch)
			require.GreaterOrEqual(t, by[small], min(fairBatch/2-1, 100-got), "batch %d", batches)
			got += by[small]
			batches++
			t.Logf("batch %d after the import: small %d, big %d", batches, by[small], by[big])
		}
		require.Equal(t, 100, got)
		// Then the big corpus has the batches to itself again.
		by, _ := f.leaseBatch(fairBatch)
		require.Equal(t, fairBatch, by[big])
	})

	t.Run("WeightsThreeToOneOverFourThousandLeases", func(t *testing.T) {
		f := newFixture(t)
		a, b := f.corpusWith("a", 5_000), f.corpusWith("b", 5_000)
		f.setShare(a, 3, 0)
		counts := map[int32]int{}
		total := 0
		for total < 4_000 {
			by, leases := f.leaseBatch(min(fairBatch, 4_000-total))
			require.NotEmpty(t, leases)
			for c, n := range by {
				counts[c] += n
			}
			total += len(leases)
		}
		require.Equal(t, 4_000, counts[a]+counts[b])
		ratio := float64(counts[a]) / float64(counts[b])
		t.Logf("a:b = %d:%d = %.3f", counts[a], counts[b], ratio)
		require.InDelta(t, 3.0, ratio, 0.3, "a:b = %d:%d, within 10%% of 3:1", counts[a], counts[b])
	})

	t.Run("PriorityCorpusIsDrainedBeforeAnyOther", func(t *testing.T) {
		f := newFixture(t)
		low := f.corpusWith("low", 2_000)
		other := f.corpusWith("other", 2_000)
		high := f.corpusWith("high", 150)
		f.setShare(high, 1, 5)
		f.setShare(other, 10, 0)
		left := 150
		for left > 0 {
			by, leases := f.leaseBatch(fairBatch)
			require.Len(t, leases, fairBatch)
			require.Equal(t, min(left, fairBatch), by[high], "the priority corpus's tasks come first")
			left -= by[high]
			if left > 0 {
				require.Zero(t, by[low]+by[other], "nothing else while the priority corpus has TODO tasks")
			}
		}
		by, _ := f.leaseBatch(fairBatch)
		require.Zero(t, by[high])
		require.Equal(t, fairBatch, by[low]+by[other])
	})

	t.Run("QueuedRetryOfAnyCorpusGoesFirst", func(t *testing.T) {
		f := newFixture(t)
		f.corpusWith("a", 500)
		f.corpusWith("b", 500)
		retry := f.leasedTo("w0") // the fixture's own corpus, its lease expired
		require.Equal(t, ReapSummary{Requeued: 1}, f.reap())
		l := f.leaseOne("w1")
		require.Equal(t, retry, l.TaskID, "the queued retry comes before any TODO task")
		require.True(t, l.Retry)
		require.Equal(t, 1, l.Attempt)
		_, leases := f.leaseBatch(fairBatch)
		require.Len(t, leases, fairBatch, "then the corpora's TODO tasks")
	})

	t.Run("RerunIsNotHandedToWorkerOfEarlierRunWithSeveralCorpora", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0")
		f.reap()
		f.rerun()
		b := f.corpusWith("b", 1)
		leases := f.lease("w0", "w0b")
		require.Len(t, leases, 2)
		for _, l := range leases {
			require.False(t, l.TaskID == id && l.Worker == "w0", "w0 worked the earlier run of task %d", id)
		}
		// The task goes to another worker, in a new run, and b's tasks are served beside it.
		got := map[int32]int{}
		for _, l := range leases {
			got[l.CorpusID]++
		}
		require.Equal(t, 1, got[b])
		require.Equal(t, queue.StatusDispatched, f.status(id))
		l := leases[0]
		if l.TaskID != id {
			l = leases[1]
		}
		require.Equal(t, "w0b", l.Worker)
		require.Equal(t, int32(2), l.Run)
	})

}

// TestFairShareTwoReplicas: two replicas, each dividing its own reservations by weight, divide
// them by weight together; and a replica restarted (a new store: its passes are gone) starts
// level, with no recovery step.
func TestFairShareTwoReplicas(t *testing.T) {
	f := newFixture(t)
	a, b := f.corpusWith("a", 5_000), f.corpusWith("b", 5_000)
	f.setShare(a, 3, 0)
	r2 := &fixture{t: t, ctx: f.ctx, pool: f.pool, clock: f.clock, corpus: f.corpus, svc: f.svc,
		store: New(f.pool, Config{Replica: "r2", LeaseTimeout: testLease, NowFunc: f.clock.Now})}
	counts := map[int32]int{}
	total := 0
	for i := 0; total < 4_000; i++ {
		r := f
		if i%2 == 1 {
			r = r2
		}
		if i == 31 { // r2 restarts midway
			r2.store = New(f.pool, Config{Replica: "r2", LeaseTimeout: testLease, NowFunc: f.clock.Now})
		}
		by, leases := r.leaseBatch(min(fairBatch, 4_000-total))
		require.NotEmpty(t, leases)
		for c, n := range by {
			counts[c] += n
		}
		total += len(leases)
	}
	ratio := float64(counts[a]) / float64(counts[b])
	t.Logf("a:b = %d:%d = %.3f", counts[a], counts[b], ratio)
	require.Equal(t, 4_000, counts[a]+counts[b])
	require.InDelta(t, 3.0, ratio, 0.3, "a:b = %d:%d, within 10%% of 3:1", counts[a], counts[b])
}
