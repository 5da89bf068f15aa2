package dispatch

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/worker"
)

func TestMain(m *testing.M) {
	queuetest.Main(m)
}

// env is one test's replica: a database, a store, a running Server on loopback and a corpus of
// source archives in a temp dir.
type env struct {
	t       *testing.T
	ctx     context.Context
	pool    *pgxpool.Pool
	store   *lease.Store
	server  *Server
	vent    string
	sink    string
	dir     string
	corpus  int32
	svc     int32
	svcName string
	stop    func()
	staged  int
}

type envOption func(*lease.Config, *Config)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	pool := queuetest.NewPool(t)
	return newEnvWith(t, pool, pool, opts...)
}

// newEnvWith is newEnv on a database of the test's: the server works through serverPool, the
// test's own checks through pool.
func newEnvWith(t *testing.T, serverPool, pool *pgxpool.Pool, opts ...envOption) *env {
	t.Helper()
	ctx := context.Background()
	lcfg := lease.Config{Replica: "r1", LeaseTimeout: time.Minute}
	dcfg := Config{
		VentilatorAddr: "tcp://127.0.0.1:*", SinkAddr: "tcp://127.0.0.1:*",
		Logger: testLogger(t), SyncArchives: false, BindRetry: time.Second,
	}
	for _, o := range opts {
		o(&lcfg, &dcfg)
	}
	store := lease.New(serverPool, lcfg)
	e := &env{t: t, ctx: ctx, pool: pool, store: store, dir: t.TempDir(), svcName: "echo"}
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO corpora (name, path) VALUES ('c', $1) RETURNING id`, e.dir).Scan(&e.corpus))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO services (name) VALUES ('echo') RETURNING id`).Scan(&e.svc))
	e.server, e.vent, e.sink, e.stop = runServer(t, serverPool, store, dcfg)
	return e
}

// runServer runs a Server on store; stop (also a cleanup) stops it and checks its error.
func runServer(t *testing.T, pool *pgxpool.Pool, store *lease.Store, dcfg Config) (srv *Server, vent, sink string, stop func()) {
	t.Helper()
	b := base.New(pool, nil, nil)
	srv, err := New(Deps{Store: store, Catalog: b.Catalog, Keys: b.Allowlist, ConnConfig: pool.Config().ConnConfig}, dcfg)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	vent, sink, err = srv.Endpoints(context.Background())
	require.NoError(t, err)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Error("server did not stop within 10 s")
			}
		})
	}
	t.Cleanup(stop)
	return srv, vent, sink, stop
}

// replica is another replica on an env's database.
type replica struct {
	server     *Server
	vent, sink string
}

// replica starts another replica named name on e's database, its lease clock moved by clock
// (nil: the database's).
func (e *env) replica(name string, clock *testClock, opts ...envOption) *replica {
	e.t.Helper()
	lcfg := lease.Config{Replica: name, LeaseTimeout: time.Minute}
	if clock != nil {
		lcfg.NowFunc = clock.Now
	}
	dcfg := Config{
		VentilatorAddr: "tcp://127.0.0.1:*", SinkAddr: "tcp://127.0.0.1:*",
		Logger: testLogger(e.t), SyncArchives: false, BindRetry: time.Second,
	}
	for _, o := range opts {
		o(&lcfg, &dcfg)
	}
	r := &replica{}
	r.server, r.vent, r.sink, _ = runServer(e.t, e.pool, lease.New(e.pool, lcfg), dcfg)
	return r
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

// sourceZip returns a source archive whose cortex.log says conversion status n, with a payload
// member of size bytes.
func sourceZip(t *testing.T, n int, size int, seed int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "cortex.log", Method: zip.Store})
	require.NoError(t, err)
	fmt.Fprintf(w, "Info:cortex:echo seed %d\nStatus:conversion:%d\n", seed, n)
	w, err = zw.CreateHeader(&zip.FileHeader{Name: "content.tex", Method: zip.Store})
	require.NoError(t, err)
	payload := bytes.Repeat([]byte{byte('a' + seed%26)}, size)
	_, err = w.Write(payload)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// stage writes n source archives and imports a task for each; it returns the task ids.
func (e *env) stage(n, size int) []int64 {
	e.t.Helper()
	return e.importInto(e.corpus, e.writeArchives(n, size))
}

// writeArchives writes n source archives in directories of their own under e.dir.
func (e *env) writeArchives(n, size int) []string {
	e.t.Helper()
	entries := make([]string, n)
	for i := range n {
		i := e.staged + i
		dir := filepath.Join(e.dir, fmt.Sprintf("%05d", i))
		require.NoError(e.t, os.MkdirAll(dir, 0o755))
		entries[i-e.staged] = filepath.Join(dir, "source.zip")
		require.NoError(e.t, os.WriteFile(entries[i-e.staged], sourceZip(e.t, 0, size, i), 0o644))
	}
	e.staged += n
	return entries
}

// importInto imports a task of corpus (of path e.dir) for each entry, in one statement, in
// order; it returns the task ids.
func (e *env) importInto(corpus int32, entries []string) []int64 {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `INSERT INTO tasks (service_id, corpus_id, entry)
		SELECT $1, $2, e FROM unnest($3::text[]) WITH ORDINALITY AS u(e, i) ORDER BY i RETURNING id`,
		e.svc, corpus, entries)
	require.NoError(e.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(e.t, err)
	require.Len(e.t, ids, len(entries))
	return ids
}

// workers runs n echo workers; the returned func stops them and waits.
func (e *env) workers(n int, tune ...func(*worker.Config)) (*worker.Stats, func()) {
	return e.workersWith(worker.Echo{}, n, tune...)
}

// workersWith runs n workers of h; the returned func stops them and waits.
func (e *env) workersWith(h worker.Handler, n int, tune ...func(*worker.Config)) (*worker.Stats, func()) {
	cfg := worker.Config{
		Ventilator: e.vent, Sink: e.sink, Service: e.svcName, Identity: "echo-" + e.t.Name(),
		Concurrency: n, Throttle: 20 * time.Millisecond, IOTimeout: 5 * time.Second,
		Backoff: 50 * time.Millisecond, Logger: testLogger(e.t), TempDir: e.t.TempDir(),
		Stats: &worker.Stats{},
	}
	for _, f := range tune {
		f(&cfg)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx, cfg, h) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(e.t, err)
			case <-time.After(10 * time.Second):
				e.t.Error("workers did not stop within 10 s")
			}
		})
	}
	e.t.Cleanup(stop)
	return cfg.Stats, stop
}

// echoAll runs n echo workers until no task is TODO or dispatched (reaping as the leader would,
// if reap), stops them, and checks that the tasks ids were echoed.
func (e *env) echoAll(n int, reap bool, ids []int64) {
	e.t.Helper()
	_, stop := e.workers(n)
	e.waitTerminal(60*time.Second, reap)
	stop()
	e.requireEchoed(ids)
}

// counts reports tasks by status.
func (e *env) counts() map[queue.Status]int {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT status, count(*) FROM tasks GROUP BY status`)
	require.NoError(e.t, err)
	defer rows.Close()
	out := map[queue.Status]int{}
	for rows.Next() {
		var st int16
		var n int
		require.NoError(e.t, rows.Scan(&st, &n))
		out[queue.Status(st)] = n
	}
	return out
}

// waitTerminal waits until no task is TODO or dispatched, reaping as the leader would, and
// fails the test past timeout.
func (e *env) waitTerminal(timeout time.Duration, reap bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c := e.counts()
		if c[queue.StatusTODO]+c[queue.StatusDispatched] == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("tasks not terminal after %s: %v", timeout, c)
		}
		if reap {
			_, err := e.store.ReapAll(e.ctx)
			require.NoError(e.t, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) entry(id int64) string {
	var entry string
	require.NoError(e.t, e.pool.QueryRow(e.ctx, `SELECT entry FROM tasks WHERE id = $1`, id).Scan(&entry))
	return entry
}

// requireEchoed checks every task is NoProblem with a result archive identical to its source.
func (e *env) requireEchoed(ids []int64) {
	e.t.Helper()
	for _, id := range ids {
		var st int16
		var entry string
		require.NoError(e.t, e.pool.QueryRow(e.ctx, `SELECT status, entry FROM tasks WHERE id = $1`, id).Scan(&st, &entry))
		require.Equal(e.t, queue.StatusNoProblem, queue.Status(st), "task %d", id)
		src, err := os.ReadFile(entry)
		require.NoError(e.t, err)
		res, err := os.ReadFile(filepath.Join(filepath.Dir(entry), e.svcName+".zip"))
		require.NoError(e.t, err, "task %d's result archive", id)
		require.True(e.t, bytes.Equal(src, res), "task %d's result is byte-identical to its source", id)
		// Only these tasks' directories: other tasks' results may still be being written.
		left, err := filepath.Glob(filepath.Join(filepath.Dir(entry), ".*.tmp-*"))
		require.NoError(e.t, err)
		require.Empty(e.t, left, "task %d: no temp archive left behind", id)
	}
}

func withClock(c *testClock) envOption {
	return func(l *lease.Config, _ *Config) { l.NowFunc = c.Now }
}

// withWorkerCap lets one worker hold n unanswered leases: for tests where one raw peer
// stands for a worker that holds many.
func withWorkerCap(n int) envOption {
	return func(_ *lease.Config, d *Config) { d.MaxInFlightPerWorker = n }
}

func withMaxResult(n int64) envOption {
	return func(_ *lease.Config, d *Config) { d.MaxResultBytes = n }
}

// reap runs a reaper pass as the leader would.
func (e *env) reap() lease.ReapSummary {
	e.t.Helper()
	sum, err := e.store.ReapAll(e.ctx)
	require.NoError(e.t, err)
	if sum.Released > 0 {
		e.waitStockChecked()
	}
	return sum
}

// waitStockChecked waits until the replica's stock holds only tasks it still has reserved.
// Tests that move the database clock past reservations' deadlines (their reaper takes them
// back) need it: in a real run the stock's own age limit, a third of the TTL, comes first.
func (e *env) waitStockChecked() {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		var ids []int64
		e.server.stocks.ids.Range(func(id int64, _ struct{}) bool {
			ids = append(ids, id)
			return true
		})
		if len(ids) == 0 {
			return true
		}
		var n int
		err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM dispatch WHERE task_id = ANY($1) AND state = 'reserved'`, ids).Scan(&n)
		return err == nil && n == len(ids)
	}, 10*time.Second, 10*time.Millisecond, "the stock checked against the database")
}

func (e *env) status(id int64) queue.Status {
	e.t.Helper()
	var st int16
	require.NoError(e.t, e.pool.QueryRow(e.ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&st))
	return queue.Status(st)
}

// waitStatus waits until task id has status want.
func (e *env) waitStatus(id int64, want queue.Status) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.status(id) != want {
		if time.Now().After(deadline) {
			e.t.Fatalf("task %d: status %v, want %v", id, e.status(id), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOutcome waits until an attempt of task id has outcome want (what the sink decided).
func (e *env) waitOutcome(id int64, run, attempt int, want string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got *string
		err := e.pool.QueryRow(e.ctx, `SELECT outcome FROM attempts WHERE task_id = $1 AND run = $2 AND attempt = $3`,
			id, run, attempt).Scan(&got)
		if err == nil && got != nil && *got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("task %d run %d attempt %d: outcome %v, want %s (err %v)", id, run, attempt, got, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hold runs statement (a lock) in a transaction of its own and keeps it open: what waits on the
// lock waits until release, which the test's cleanup also calls.
func (e *env) hold(statement string, args ...any) (release func()) {
	e.t.Helper()
	tx, err := e.pool.Begin(e.ctx)
	require.NoError(e.t, err)
	release = func() { _ = tx.Rollback(context.WithoutCancel(e.ctx)) }
	e.t.Cleanup(release)
	_, err = tx.Exec(e.ctx, statement, args...)
	require.NoError(e.t, err)
	return release
}
