package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/lease"
)

// TestFairShareWithEchoWorkers: a small corpus imported while echo workers work through another
// corpus's backlog of the same service is leased at once, beside the backlog, not after it
// (docs/semantics.md#fair-share). Asserted by lease counts.
func TestFairShareWithEchoWorkers(t *testing.T) {
	const batch = 64
	e := newEnv(t, func(_ *lease.Config, c *Config) { c.ReserveBatch = batch })
	e.stage(1_500, 1_000)
	var small int32
	require.NoError(t, e.pool.QueryRow(e.ctx, `INSERT INTO corpora (name, path) VALUES ('small', $1) RETURNING id`, e.dir).Scan(&small))
	_, stop := e.workers(4)
	defer stop()

	count := func(query string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, e.pool.QueryRow(e.ctx, query, args...).Scan(&n))
		return n
	}
	// The backlog is being worked: 200 of its tasks are done.
	deadline := time.Now().Add(60 * time.Second)
	for count(`SELECT count(*) FROM tasks WHERE corpus_id = $1 AND status < 0`, e.corpus) < 200 {
		require.True(t, time.Now().Before(deadline), "200 tasks of the backlog done within 60 s")
		time.Sleep(20 * time.Millisecond)
	}
	// What the replica holds of the backlog at the import (reserved or leased) goes out first.
	entries := e.writeArchives(100, 1_000)
	held := count(`SELECT count(*) FROM tasks WHERE corpus_id = $1 AND status = 1`, e.corpus)
	var importedAt time.Time
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT now()`).Scan(&importedAt))
	ids := e.importInto(small, entries)

	deadline = time.Now().Add(60 * time.Second)
	for count(`SELECT count(*) FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.corpus_id = $1`, small) < 100 {
		require.True(t, time.Now().Before(deadline), "the small corpus's 100 tasks leased within 60 s")
		time.Sleep(20 * time.Millisecond)
	}
	// Leases of the backlog between the import and the small corpus's last lease: what was held,
	// what a reservation under way at the import took (a batch), the small corpus's equal share
	// (100), and the rest of the batch its last task came in.
	between := count(`SELECT count(*) FROM attempts a JOIN tasks t ON t.id = a.task_id
		WHERE t.corpus_id = $1 AND a.leased_at > $2
		  AND a.leased_at < (SELECT max(x.leased_at) FROM attempts x JOIN tasks s ON s.id = x.task_id WHERE s.corpus_id = $3)`,
		e.corpus, importedAt, small)
	left := count(`SELECT count(*) FROM tasks WHERE corpus_id = $1 AND status = 0`, e.corpus)
	t.Logf("held at the import %d; backlog leases until the small corpus's last: %d; backlog TODO left: %d", held, between, left)
	require.LessOrEqual(t, between, held+batch+100+batch, "the small corpus is served beside the backlog")
	require.Positive(t, left, "the small corpus is leased well before the backlog is")
	e.waitTerminalOf(small, 60*time.Second)
	stop()
	e.requireEchoed(ids)
}

// waitTerminalOf waits until no task of corpus is TODO or dispatched.
func (e *env) waitTerminalOf(corpus int32, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var n int
		require.NoError(e.t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM tasks WHERE corpus_id = $1 AND status IN (0, 1)`, corpus).Scan(&n))
		if n == 0 {
			return
		}
		require.True(e.t, time.Now().Before(deadline), "%d tasks of corpus %d not terminal after %s", n, corpus, timeout)
		time.Sleep(50 * time.Millisecond)
	}
}
