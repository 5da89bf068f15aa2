package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
	"github.com/cortexq/cortexq/queue/pgembed"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// verifyFindings runs verify --json on d and returns its exit code and findings as
// "kind base-dir/file" strings, sorted (paths relative to root).
func verifyFindings(t *testing.T, d *testDB, root string, args ...string) (int, []string) {
	t.Helper()
	r := cortexq(t, d.env, append([]string{"verify", "--json"}, args...)...)
	require.Contains(t, []int{0, 1}, r.code, "verify:\n%s\n%s", r.stdout, r.stderr)
	var found []string
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var f struct {
			Kind string `json:"kind"`
			Path string `json:"path"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &f), sc.Text())
		if f.Kind == "" {
			continue // the counts
		}
		rel, err := filepath.Rel(root, f.Path)
		require.NoError(t, err)
		found = append(found, f.Kind+" "+rel)
	}
	slices.Sort(found)
	return r.code, found
}

// convertAll runs a replica and an echo worker on d until no task is TODO or dispatched.
func convertAll(t *testing.T, d *testDB) {
	t.Helper()
	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	replica := d.start("serve", "--replica", "r-verify", "--ventilator", vent, "--sink", sink,
		"--http", fmt.Sprintf("127.0.0.1:%d", loopbackPort(t)), "--reap-interval", "500ms")
	worker := d.start("worker", "echo", "--service", "echo", "--ventilator", vent, "--sink", sink,
		"--identity", "w-verify", "--concurrency", "2", "--io-timeout", "10s")
	require.Eventually(t, func() bool {
		return d.count(`SELECT count(*) FROM tasks WHERE status >= 0`) == 0
	}, time.Minute, 100*time.Millisecond, "every task converted; replica:\n%s", replica.log())
	require.Equal(t, 0, worker.stop(syscall.SIGTERM, 30*time.Second), worker.log())
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second), replica.log())
}

// pgTool runs pg_dump or pg_restore from the PostgreSQL binaries the tests use.
func pgTool(t *testing.T, name string, args ...string) {
	t.Helper()
	dir, err := pgembed.FindBin()
	require.NoError(t, err)
	out, err := exec.Command(filepath.Join(dir, name), args...).CombinedOutput()
	require.NoError(t, err, "%s %v:\n%s", name, args, out)
}

// restoreInto restores a pg_dump archive into a new database and returns a testDB on it.
func restoreInto(t *testing.T, dump string) *testDB {
	t.Helper()
	c := queuetest.Shared(t)
	name := fmt.Sprintf("t_restore_%d_%d", os.Getpid(), time.Now().UnixNano())
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, c.AdminDSN())
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0")
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, c.AdminDSN())
		if err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			conn.Close(ctx)
		}
	})
	dsn := c.DSN(name)
	pgTool(t, "pg_restore", "--no-owner", "--exit-on-error", "-d", dsn, dump)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return &testDB{t: t, ctx: ctx, dsn: dsn, env: []string{"DATABASE_URL=" + dsn}, pool: pool}
}

// copyTree copies a directory tree with its files' modification times (cp -a).
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(to))
	out, err := exec.Command("cp", "-a", from, to).CombinedOutput()
	require.NoError(t, err, "cp -a:\n%s", out)
}

// A restore puts a database and files of different times together. verify finds every
// inconsistency planted, and nothing else, both ways: an older dump under newer files, and
// older files under a newer database; the import again and verify --requeue, then a worker
// run, leave verify with nothing to say.
func TestVerifyAfterRestore(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	root := filepath.Join(t.TempDir(), "corpus")
	all, err := bench.StageCorpus(d.ctx, root, 10, 2048)
	require.NoError(t, err)
	first, extra := all[:8], all[8:]
	d.importList("c", "echo", first...)
	convertAll(t, d)
	code, found := verifyFindings(t, d, root)
	require.Equal(t, 0, code, "a consistent corpus: %v", found)
	require.Empty(t, found)
	require.Equal(t, 8, d.count(`SELECT count(*) FROM attempts WHERE outcome = 'accepted' AND result_digest IS NOT NULL`))

	// The backup: a dump and a copy of the files, taken together.
	backup := t.TempDir()
	dump := filepath.Join(backup, "db.dump")
	pgTool(t, "pg_dump", "--format=custom", "--file", dump, d.dsn)
	oldFiles := filepath.Join(backup, "files")
	copyTree(t, root, oldFiles)

	// Later work: two entries imported and converted, a source replaced and run again.
	d.importList("c", "echo", extra...)
	changed := first[3]
	bigger, err := bench.StageCorpus(d.ctx, t.TempDir(), 1, 8192)
	require.NoError(t, err)
	other, err := os.ReadFile(bigger[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(changed, other, 0o644))
	convertAll(t, d)
	code, found = verifyFindings(t, d, root)
	require.Equal(t, 1, code)
	require.Equal(t, []string{"source_changed " + relTo(t, root, changed)}, found)
	r := cortexq(t, d.env, "verify", "--requeue")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stdout, "dry run: --requeue: 1 tasks of 1 corpus and service pairs would go back to TODO in a new run; nothing changed")
	_, found = verifyFindings(t, d, root)
	require.Equal(t, []string{"source_changed " + relTo(t, root, changed)}, found, "a dry run changes nothing")
	r = cortexq(t, d.env, "verify", "--requeue", "--yes")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 tasks back to TODO")
	convertAll(t, d)
	code, found = verifyFindings(t, d, root)
	require.Equal(t, 0, code, "%v", found)
	newDump := filepath.Join(backup, "new.dump")
	pgTool(t, "pg_dump", "--format=custom", "--file", newDump, d.dsn)
	newFiles := filepath.Join(backup, "newfiles")
	copyTree(t, root, newFiles)

	res := func(entry string) string { return relTo(t, root, filepath.Join(filepath.Dir(entry), "echo.zip")) }

	t.Run("OlderDumpUnderNewerFiles", func(t *testing.T) {
		copyTree(t, newFiles, root)
		od := restoreInto(t, dump)
		require.NoError(t, os.Remove(filepath.Join(root, res(first[0]))))
		truncate(t, filepath.Join(root, res(first[1])))
		alter(t, filepath.Join(root, res(first[2])))
		_, found := verifyFindings(t, od, root)
		want := []string{
			"missing " + res(first[0]),
			"size_differs " + res(first[1]),
			"altered " + res(first[2]),
			"size_differs " + res(changed), // the new source's result, not the one the dump knows
			"source_changed " + relTo(t, root, changed),
			"orphan " + res(extra[0]), // imported after the dump
			"orphan " + res(extra[1]),
		}
		slices.Sort(want)
		require.Equal(t, want, found)
		od.importList("c", "echo", extra...) // the imports the dump forgot
		r := cortexq(t, od.env, "verify", "--requeue", "--yes")
		require.Equal(t, 1, r.code, r.stderr)
		convertAll(t, od)
		code, found := verifyFindings(t, od, root)
		require.Equal(t, 0, code, "%v", found)
		require.Empty(t, found)
	})

	t.Run("OlderFilesUnderNewerDump", func(t *testing.T) {
		copyTree(t, oldFiles, root)
		nd := restoreInto(t, newDump)
		alter(t, filepath.Join(root, res(first[5])))
		_, found := verifyFindings(t, nd, root)
		want := []string{
			"missing " + res(extra[0]), // converted after the files' copy
			"missing " + res(extra[1]),
			"altered " + res(first[5]),
			"size_differs " + res(changed), // the old source's result
			"source_changed " + relTo(t, root, changed),
		}
		slices.Sort(want)
		require.Equal(t, want, found)
		r := cortexq(t, nd.env, "verify", "--requeue", "--yes")
		require.Equal(t, 1, r.code, r.stderr)
		convertAll(t, nd)
		code, found := verifyFindings(t, nd, root)
		require.Equal(t, 0, code, "%v", found)
		require.Empty(t, found)
	})
}

func relTo(t *testing.T, root, path string) string {
	t.Helper()
	r, err := filepath.Rel(root, path)
	require.NoError(t, err)
	return r
}

// truncate cuts a file to half its size.
func truncate(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()/2))
}

// alter changes a byte of a file in place, keeping its size.
func alter(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// why names the cause of a corpus with no worker, and its fix, and a pause once paused.
func TestWhyCommand(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("w", 3)...)
	out := d.ok("why", "--corpus", "c", "--service", "echo")
	require.Contains(t, out, "no_workers: no worker asked for service echo in the last minute")
	require.Contains(t, out, "fix: start workers")
	d.ok("pause", "--corpus", "c", "--service", "echo")
	out = d.ok("why", "--corpus", "c", "--service", "echo", "--json")
	require.Contains(t, out, `"cause": "paused"`)
	require.Contains(t, out, "cortexq resume --corpus c --service echo")
}

// prune --tables drops the reaper passes and workers past their ages, alone or with runs.
func TestPruneTablesCommand(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	_, err := d.pool.Exec(d.ctx, `INSERT INTO reaper_passes (replica, at, requeued, dead_lettered, forgotten)
		SELECT 'r1', now() - g * interval '1 hour', 0, 0, 0 FROM generate_series(0, 47) g`)
	require.NoError(t, err)
	_, err = d.pool.Exec(d.ctx, `INSERT INTO workers (name, service_id, first_seen, last_request)
		SELECT 'w' || g, 1, now() - g * interval '1 hour', now() - g * interval '1 hour' FROM generate_series(0, 47) g`)
	require.NoError(t, err)
	out := d.ok("prune", "--tables", "--reaper-passes-age", "24h", "--workers-age", "12h")
	require.Contains(t, out, "dry run: --tables would drop the reaper passes older than 24h0m0s and the workers not seen for 12h0m0s")
	require.Equal(t, 48, d.count(`SELECT count(*) FROM reaper_passes`))
	out = d.ok("prune", "--yes", "--tables", "--reaper-passes-age", "24h", "--workers-age", "12h")
	require.Contains(t, out, "dropped 24 reaper passes (24 left) and 36 workers (12 left)")
	require.Equal(t, 24, d.count(`SELECT count(*) FROM reaper_passes`))
}

// A replica refuses a name a live replica holds, running or frozen (SIGSTOP), naming the
// holder; the name of one killed with kill -9 under load is free at once: the restart serves
// without watching a heartbeat. Over the test cluster's Unix socket and over TCP.
func TestReplicaNameHeldByALiveReplica(t *testing.T) {
	t.Run("unix", func(t *testing.T) { testReplicaName(t, newTestDB(t)) })
	t.Run("tcp", func(t *testing.T) {
		t.Parallel()
		c := queuetest.NewTCPCluster(t, loopbackPort(t))
		testReplicaName(t, newTestDBOn(t, c.NewDB(t)))
	})
}

func testReplicaName(t *testing.T, d *testDB) {
	d.ok("service", "add", "echo")
	staged, err := bench.StageCorpus(d.ctx, t.TempDir(), 1000, 1024)
	require.NoError(t, err)
	d.importList("c", "echo", staged...)
	vent, sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t)), fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	serve := func() *process {
		return d.start("serve", "--replica", "r-same", "--ventilator", vent, "--sink", sink, "--http", "")
	}
	refused := func(p *process, why string) {
		t.Helper()
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			t.Fatalf("a second replica of a live (%s) name kept running:\n%s", why, p.log())
		}
		require.Equal(t, 1, p.cmd.ProcessState.ExitCode(), p.log())
		require.Contains(t, p.log(), `replica name "r-same" is held by a live replica (cortexq replica r-same host `, why)
		require.Contains(t, p.log(), "pg_terminate_backend(", why)
	}
	first := serve()
	waitFor(t, time.Minute, "the replica serves", func() bool { return strings.Contains(first.log(), "serving workers") })
	// Converting at about 20 tasks/s: still under way after the kill. A request lost with the
	// killed replica is asked again after --io-timeout.
	d.start("worker", "exec", "--service", "echo", "--ventilator", vent, "--sink", sink, "--concurrency", "4",
		"--throttle", "50ms", "--io-timeout", "3s", "--", "sh", "-c", `sleep 0.2; cp "$0" "$1"`, "{in}", "{out}")
	done := func() int { return d.count(`SELECT count(*) FROM tasks WHERE status = -1`) } // NoProblem
	waitFor(t, time.Minute, "tasks convert", func() bool { return done() > 0 })

	refused(serve(), "running")
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGSTOP))
	refused(serve(), "frozen")
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGCONT))

	require.NoError(t, first.cmd.Process.Kill()) // kill -9 mid-run
	<-first.done
	again := serve()
	waitFor(t, time.Minute, "the restarted replica serves", func() bool { return strings.Contains(again.log(), "serving workers") })
	require.NotContains(t, again.log(), "watching its heartbeat", "the lock decided, not the heartbeat")
	before := done()
	waitFor(t, time.Minute, "tasks convert through the restarted replica", func() bool { return done() > before })
	require.Equal(t, 0, again.stop(syscall.SIGTERM, 30*time.Second), again.log())
}

// Times the CLI prints carry their zone: UTC by default, the local one with --local.
func TestPrintedTimesCarryTheirZone(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("z", 2)...)
	d.env = append(d.env, "TZ=America/New_York")
	out := d.ok("runs", "--corpus", "c", "--service", "echo")
	require.Regexp(t, `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`, out)
	out = d.ok("--local", "runs", "--corpus", "c", "--service", "echo")
	require.Regexp(t, `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d E[SD]T`, out)
	require.NotContains(t, out, " UTC")
	var id int64
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT min(id) FROM tasks`).Scan(&id))
	d.lease(d.scope("c", "echo").ServiceID, "w1")
	out = d.ok("task", "show", fmt.Sprint(id))
	require.Regexp(t, `\d\d:\d\d:\d\d\.\d{3} UTC`, out)
}

// --database-url-file reads the connection string from a file (a Docker secret), alone.
func TestDatabaseURLFile(t *testing.T) {
	d := newTestDB(t)
	f := filepath.Join(t.TempDir(), "database_url")
	require.NoError(t, os.WriteFile(f, []byte(d.dsn+"\n"), 0o600))
	r := cortexq(t, []string{"CORTEXQ_DATABASE_URL_FILE=" + f}, "service", "add", "echo")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, d.count(`SELECT count(*) FROM services WHERE name = 'echo'`))
	r = cortexq(t, append([]string{"CORTEXQ_DATABASE_URL_FILE=" + f}, d.env...), "service", "list")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "not both")
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	r = cortexq(t, []string{"CORTEXQ_DATABASE_URL_FILE=" + empty}, "service", "list")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "is empty")
}

// web --admin-token-file reads the token from a file, checked as --admin-token is.
func TestAdminTokenFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(f, []byte("short\n"), 0o600))
	r := cortexq(t, nil, "web", "--admin-token-file", f)
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "want at least 16 characters")
	r = cortexq(t, nil, "web", "--admin-token-file", f, "--admin-token", "0123456789abcdef")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "not both")
}

// A worker told to stop (SIGTERM) mid-conversion finishes it and sends its result: the task is
// done in the attempt it had, none lost; a second signal would abandon it.
func TestWorkerSIGTERMFinishesTheConversionInHand(t *testing.T) {
	d, replica, worker := startConverting(t, 1, "r-warm", "w-warm", "--grace", "1m")
	require.Equal(t, 0, worker.stop(syscall.SIGTERM, time.Minute), worker.log())
	require.Contains(t, worker.log(), "finishing the conversions in hand")
	require.NotContains(t, worker.log(), "abandoned")
	require.Eventually(t, func() bool { return d.count(`SELECT count(*) FROM tasks WHERE status = -1`) == 1 },
		30*time.Second, 50*time.Millisecond, "the task done; replica:\n%s", replica.log())
	require.Equal(t, 1, d.count(`SELECT count(*) FROM attempts`), "one attempt, not a retry")
	require.Equal(t, 1, d.count(`SELECT count(*) FROM attempts WHERE outcome = 'accepted' AND worker LIKE 'w-warm%'`))
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second), replica.log())
}

// A replica drained with SIGUSR1 leases nothing more and still takes the result of the
// conversion it leased: no conversion and no attempt lost; the rest waits TODO.
func TestReplicaDrainedBySIGUSR1(t *testing.T) {
	d, replica, worker := startConverting(t, 3, "r-drain", "w-drain")
	require.NoError(t, replica.cmd.Process.Signal(syscall.SIGUSR1))
	require.Eventually(t, func() bool { return strings.Contains(replica.log(), "draining (SIGUSR1)") },
		30*time.Second, 50*time.Millisecond, replica.log())
	require.Eventually(t, func() bool { return d.count(`SELECT count(*) FROM tasks WHERE status = -1`) == 1 },
		time.Minute, 50*time.Millisecond, "the leased task done; replica:\n%s", replica.log())
	time.Sleep(2 * time.Second) // the worker asks again meanwhile, and gets no work
	require.Equal(t, 1, d.count(`SELECT count(*) FROM attempts`), "one attempt: nothing leased after the drain")
	require.Equal(t, 1, d.count(`SELECT count(*) FROM attempts WHERE outcome = 'accepted'`))
	require.Equal(t, 0, worker.stop(syscall.SIGTERM, time.Minute), worker.log())
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second), replica.log())
	require.Equal(t, 0, d.count(`SELECT count(*) FROM tasks WHERE status > 0`), "the stock went back: nothing dispatched")
}

// startConverting stages tasks echo tasks, starts a replica named replica and an exec worker
// named identity (with extra flags) whose conversions take 3 s, and returns once the first
// conversion began.
func startConverting(t *testing.T, tasks int, replica, identity string, extra ...string) (d *testDB, rp, worker *process) {
	t.Helper()
	d = newTestDB(t)
	d.ok("service", "add", "echo")
	staged, err := bench.StageCorpus(d.ctx, t.TempDir(), tasks, 2048)
	require.NoError(t, err)
	d.importList("c", "echo", staged...)
	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	rp = d.start("serve", "--replica", replica, "--ventilator", vent, "--sink", sink,
		"--http", fmt.Sprintf("127.0.0.1:%d", loopbackPort(t)))
	marker := filepath.Join(t.TempDir(), "converting")
	args := append([]string{"worker", "exec", "--service", "echo", "--ventilator", vent, "--sink", sink,
		"--identity", identity, "--throttle", "100ms", "--io-timeout", "10s"}, extra...)
	worker = d.start(append(args, "--", "sh", "-c", `touch "$2"; sleep 3; cp "$0" "$1"`, "{in}", "{out}", marker)...)
	require.Eventually(t, func() bool { _, err := os.Stat(marker); return err == nil },
		time.Minute, 50*time.Millisecond, "the conversion began; worker:\n%s", worker.log())
	return d, rp, worker
}
