package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
	"github.com/cortexq/cortexq/internal/version"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/lease"
)

// previousRelease reads CHANGELOG.md for the newest release before this build's that records
// the commit it was made from ("Commit: <hash>" in its section).
func previousRelease(t *testing.T) (release, commit string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "CHANGELOG.md"))
	require.NoError(t, err)
	heading := regexp.MustCompile(`^## (v\d+\.\d+\.\d+\S*)`)
	commitLine := regexp.MustCompile(`^Commit: ([0-9a-f]{7,40})\b`)
	var current string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if m := heading.FindStringSubmatch(sc.Text()); m != nil {
			current = m[1]
			continue
		}
		if m := commitLine.FindStringSubmatch(sc.Text()); m != nil && current != "" && current != version.Release() {
			return current, m[1]
		}
	}
	t.Fatalf("CHANGELOG.md records no earlier release with a Commit: line")
	return "", ""
}

// oldBinaries are the previous releases' binaries built in this test process, by commit.
var oldBinaries sync.Map

// releaseBinary builds cortexq as it was at commit (from this repository's history: CI clones the
// whole of it) into the user's cache directory, once per commit: git archive unpacks the commit's
// tree, go build (its packages cached in the Go build cache, -trimpath so that the path of the
// tree does not matter) makes the binary.
func releaseBinary(t *testing.T, commit string) string {
	t.Helper()
	if p, ok := oldBinaries.Load(commit); ok {
		return p.(string)
	}
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	dir := filepath.Join(cache, "cortexq-test", "release-"+commit)
	bin := filepath.Join(dir, "cortexq")
	if _, err := os.Stat(bin); err != nil {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		require.NoError(t, err)
		src := filepath.Join(dir, "src")
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.MkdirAll(src, 0o755))
		unpack := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
		out, err := unpack.CombinedOutput()
		require.NoError(t, err, "unpack commit %s of the repository (a shallow clone lacks it: fetch its history): %s", commit, out)
		build := exec.Command("go", "build", "-trimpath", "-o", bin+".tmp", "./cmd/cortexq")
		build.Dir = src
		out, err = build.CombinedOutput()
		require.NoError(t, err, "go build at %s: %s", commit, out)
		require.NoError(t, os.Rename(bin+".tmp", bin))
		require.NoError(t, os.RemoveAll(src))
	}
	oldBinaries.Store(commit, bin)
	return bin
}

// runOK runs bin with args and requires it to succeed, returning its output.
func runOK(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORTEXQ_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v: %s", bin, args, out)
	return string(out)
}

// TestUpgradeRollingFromThePreviousRelease is the upgrade docs/operations.md ("Upgrades")
// promises: on a database the previous release made, two of its replicas dispatch under load;
// this build's `migrate up` runs live; then the replicas are replaced by this build's, one at a
// time. Every task ends NoProblem with exactly one accepted attempt, and the old replicas log
// no error after the migration began.
func TestUpgradeRollingFromThePreviousRelease(t *testing.T) {
	skipShortFault(t)
	release, commit := previousRelease(t)
	old := releaseBinary(t, commit)
	t.Logf("upgrading from %s (commit %s) to %s", release, commit, version.Release())
	dsn := emptyDB(t, "upgrade")
	runOK(t, old, "--database-url", dsn, "migrate", "up")
	runOK(t, old, "--database-url", dsn, "service", "add", faultService)

	r := upgradeRig(t, dsn)
	corpus := filepath.Join(r.dir, "corpus")
	// The tasks come in four batches, each imported when the one before is done (or half done),
	// so that every step of the upgrade has work: the old replicas before, during and after the
	// migration, an old and a new replica side by side, then the new ones.
	batch := func(i int, bin string) {
		t.Helper()
		entries, err := bench.StageCorpus(r.ctx, filepath.Join(corpus, fmt.Sprintf("b%d", i)), upgradeBatch, 2048)
		require.NoError(t, err)
		r.entries = append(r.entries, entries...)
		runOK(t, bin, "--database-url", dsn, "--log-level", "warn", "import", "--corpus", "upgrade", "--service", faultService, corpus)
	}
	halfDone := func(p faultProgress) bool { return p.terminal >= p.total-upgradeBatch/2 }
	batch(1, old)
	require.NoError(t, r.pool.QueryRow(r.ctx, `SELECT id FROM corpora WHERE name = 'upgrade'`).Scan(&r.corpusID))

	// This build refuses the old schema, saying what to run.
	refused := cortexq(t, []string{"DATABASE_URL=" + dsn}, "status")
	oneLineFailure(t, refused, "cortexq: the database schema is not up to date: run `cortexq migrate up` first")

	olds := startOldReplicas(r, old)
	r.waitFor("the first batch done by the old replicas", 5*time.Minute, allTerminal, nil)

	// The migration, live, while the old replicas dispatch the second batch. Their log lines from
	// here on must hold no error.
	offsets := make([]int64, len(olds))
	for i, rp := range olds {
		offsets[i] = fileSize(t, rp.logPath)
	}
	batch(2, old)
	out := cortexq(t, []string{"DATABASE_URL=" + dsn}, "migrate", "up")
	require.Equal(t, 0, out.code, "migrate up: %s\n%s", out.stdout, out.stderr)
	t.Logf("migrate up, live:\n%s", out.stdout)
	require.Contains(t, out.stderr, "lock_timeout", "migrate up says how long it waits for locks")
	migratedAt := r.dbNow()
	// An old replica's error fails the test at once, not when a batch never ends.
	noErrors := func(faultProgress) {
		for i, rp := range olds {
			if rp.bin == old {
				requireNoErrorLogged(t, rp, offsets[i])
			}
		}
	}
	r.waitFor("the second batch done", 5*time.Minute, allTerminal, noErrors)

	// The replicas replaced one at a time, on the same endpoints, while the workers go on.
	for i, rp := range olds {
		batch(3+i, binary(t))
		r.waitFor(fmt.Sprintf("half of batch %d done", 3+i), 5*time.Minute, halfDone, noErrors)
		rp.stop(syscall.SIGTERM, 90*time.Second)
		code, _ := rp.wait(time.Second)
		require.Equal(t, 0, code, "old replica %s drains and exits 0 on SIGTERM", rp.name)
		requireNoErrorLogged(t, rp, offsets[i])
		rp.bin = binary(t)
		rp.start()
		rp.waitHealthy(t, 60*time.Second)
		info, err := rp.metric("cortexq_build_info")
		require.NoError(t, err)
		require.Equal(t, 1.0, info)
	}
	r.waitFor("every task terminal", 10*time.Minute, allTerminal, nil)
	p, a := r.checkFinished()
	require.Equal(t, 4*upgradeBatch, p.total)
	require.Equal(t, p.total, p.noProblem, "every task NoProblem: %v", p)
	require.Zero(t, a.notExactlyOne)
	require.Equal(t, float64(p.total), r.mustScalar(`SELECT count(*) FROM attempts a JOIN tasks t ON t.id = a.task_id AND t.run = a.run
		WHERE t.corpus_id = $1 AND a.outcome = 'accepted'`, r.corpusID), "exactly one accepted attempt a task")
	require.Positive(t, r.mustScalar(`SELECT count(*) FROM attempts WHERE outcome = 'accepted' AND replica IN ('a', 'b')
		AND answered_at > $1`, migratedAt), "old replicas recorded results against the new schema")
}

// upgradeBatch is the size of each of TestUpgradeRollingFromThePreviousRelease's four batches.
const upgradeBatch = 400

// startOldReplicas starts two replicas of the old binary, logging JSON, and three workers of it
// (four loops each) connected to both; the workers stay as they are through the upgrade.
func startOldReplicas(r *faultRig, old string) []*replicaProc {
	r.t.Helper()
	var olds []*replicaProc
	for _, name := range []string{"a", "b"} {
		rp := r.addReplica(name, "--lease-timeout", "20s")
		rp.bin = old
		rp.args = append([]string{"--log-format", "json"}, rp.args...)
		olds = append(olds, rp)
	}
	r.startReplicas()
	for i := range 3 {
		w := r.child(fmt.Sprintf("worker-%d", i), "--log-level", "warn", "worker", "echo",
			"--service", faultService, "--identity", fmt.Sprintf("upgrade-%d", i), "--concurrency", "4",
			"--ventilator", olds[0].ventilator+","+olds[1].ventilator, "--sink", olds[0].sink+","+olds[1].sink,
			"--throttle", "100ms", "--io-timeout", "3s")
		w.bin = old
		w.start()
		r.workers = append(r.workers, w)
	}
	return olds
}

// upgradeRig is a faultRig on a database the previous release made: nothing of this build's
// code writes to it before its migration.
func upgradeRig(t *testing.T, dsn string) *faultRig {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	root := base.New(pool, nil, nil)
	r := &faultRig{t: t, ctx: ctx, dsn: dsn, pool: pool, dir: t.TempDir(), root: root,
		store: root.Lease(lease.Config{Replica: "upgrade-test"})}
	t.Cleanup(r.stopAll)
	return r
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// requireNoErrorLogged requires that rp (logging JSON) logged no line at level ERROR after byte
// offset from of its log.
func requireNoErrorLogged(t *testing.T, rp *replicaProc, from int64) {
	t.Helper()
	b, err := os.ReadFile(rp.logPath)
	require.NoError(t, err)
	var errs []string
	for _, line := range strings.Split(string(b[from:]), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			errs = append(errs, line)
		}
	}
	require.Empty(t, errs, "replica %s logged errors after the migration began", rp.name)
}

// TestMigrateUpRetriesALockTimeout: while another session holds a lock migrate up needs, migrate
// up gives up waiting after --lock-timeout, says so, and tries again until the lock is free.
func TestMigrateUpRetriesALockTimeout(t *testing.T) {
	d := newTestDB(t)
	binary(t) // built before the lock is taken
	tx, err := d.pool.Begin(d.ctx)
	require.NoError(t, err)
	defer tx.Rollback(d.ctx) //nolint:errcheck // released below; this is the failure path's
	_, err = tx.Exec(d.ctx, `LOCK TABLE goose_db_version IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	// The lock is released once migrate up has waited for it and given up once.
	released := make(chan error, 1)
	go func() {
		waiting := func() bool {
			var n int
			err := d.pool.QueryRow(d.ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE wait_event_type = 'Lock' AND query LIKE '%goose_db_version%'`).Scan(&n)
			return err == nil && n > 0
		}
		seen := false
		for range 3000 { // 60 s
			w := waiting()
			if seen && !w {
				break
			}
			seen = seen || w
			time.Sleep(20 * time.Millisecond)
		}
		released <- tx.Rollback(d.ctx)
	}()
	r := cortexq(t, d.env, "migrate", "up", "--lock-timeout", "200ms")
	require.NoError(t, <-released)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "nothing to apply\n", r.stdout)
	require.Contains(t, r.stderr, "a statement waited past lock_timeout for a lock")
	require.Contains(t, r.stderr, "attempt=1")

	r = cortexq(t, d.env, "migrate", "up", "--lock-retries", "-1")
	require.Equal(t, 2, r.code)
}
