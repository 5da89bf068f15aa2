package main

import (
	"archive/zip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// TestLifecycle walks a corpus's life through the CLI: register two services, add a corpus (an
// import), activate the second service, extend with new files, deactivate the first, delete the
// corpus and the service. Each deletion previews without --yes and changes nothing, then
// removes what it previewed, leaves no row pointing at a corpus, service, task or run that is
// gone (queuetest.Orphans: every keyed table, from information_schema), keeps the runs'
// tallies by name, and leaves files alone unless --files. Every step appends an audit row.
func TestLifecycle(t *testing.T) {
	d := newTestDB(t)
	dir := t.TempDir()
	source := sourceMaker(t, dir)
	noOrphans := func() {
		t.Helper()
		orphans, err := queuetest.Orphans(d.ctx, d.pool)
		require.NoError(t, err)
		require.Empty(t, orphans)
	}
	tasksOf := func(service string) int {
		return d.count(`SELECT count(*) FROM tasks t JOIN services s ON s.id = t.service_id WHERE s.name = $1`, service)
	}
	one := source("one")
	source("two")

	d.ok("service", "add", "svc_a")
	d.ok("service", "add", "svc_b")
	require.Contains(t, d.ok("corpus", "add", "life", dir, "--service", "svc_a"), "2 tasks added")
	require.Contains(t, d.ok("activate", "--corpus", "life", "--service", "svc_b"), "2 tasks added, 2 entries read; opened a run")
	source("three")
	require.Contains(t, d.ok("extend", "--corpus", "life"), "3 source archives found, 2 tasks added for svc_a, svc_b")
	require.Equal(t, 3, tasksOf("svc_a"))
	require.Equal(t, 3, tasksOf("svc_b"))

	// svc_a's results: a result archive beside each source, a warning and an attempt each.
	_, err := d.pool.Exec(d.ctx, `UPDATE tasks SET status = -2 FROM services s WHERE s.id = tasks.service_id AND s.name = 'svc_a'`)
	require.NoError(t, err)
	_, err = d.pool.Exec(d.ctx, `INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at, answered_at, outcome, status)
		SELECT t.id, 1, 0, 'w', 'r1', now(), now(), 'accepted', -2 FROM tasks t JOIN services s ON s.id = t.service_id WHERE s.name = 'svc_a'`)
	require.NoError(t, err)
	resultA := filepath.Join(filepath.Dir(one), "svc_a.zip")
	resultB := filepath.Join(filepath.Dir(one), "svc_b.zip")
	require.NoError(t, os.WriteFile(resultA, []byte("a"), 0o644))
	require.NoError(t, os.WriteFile(resultB, []byte("b"), 0o644))

	out := d.ok("deactivate", "--corpus", "life", "--service", "svc_a")
	require.Contains(t, out, "dry run: corpus life, service svc_a: would remove")
	require.Contains(t, out, "tasks 3, attempts 3")
	require.Equal(t, 3, tasksOf("svc_a"), "a dry run removes nothing")
	out = d.ok("deactivate", "--corpus", "life", "--service", "svc_a", "--yes", "--batch", "2")
	require.Contains(t, out, "tasks 3, attempts 3")
	require.Contains(t, out, "1 runs closed")
	require.Zero(t, tasksOf("svc_a"))
	noOrphans()
	require.FileExists(t, resultA, "files stay without --files")
	require.Equal(t, 3, d.count(`SELECT warning FROM runs WHERE corpus_name = 'life' AND service_name = 'svc_a'`), "the run's tallies stay")

	out = d.ok("corpus", "delete", "life")
	require.Contains(t, out, "dry run: corpus life: would remove")
	require.Contains(t, out, "2 runs kept with their tallies")
	require.Equal(t, 3, tasksOf("svc_b"))
	out = d.ok("corpus", "delete", "life", "--yes", "--files")
	require.Contains(t, out, "tasks 3")
	require.Contains(t, out, "1 result archives removed")
	noOrphans()
	require.NoFileExists(t, resultB, "--files removes the deleted tasks' result archives")
	require.FileExists(t, one, "sources stay")
	require.Equal(t, 2, d.count(`SELECT count(*) FROM runs WHERE corpus_name = 'life' AND corpus_id IS NULL`), "runs kept by name")
	require.Equal(t, 3, d.count(`SELECT tasks FROM runs WHERE corpus_name = 'life' AND service_name = 'svc_b'`))
	r := cortexq(t, d.env, "corpus", "delete", "life", "--yes")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "corpus life")

	require.Contains(t, d.ok("service", "delete", "svc_a"), "1 runs kept with their tallies")
	d.ok("service", "delete", "svc_a", "--yes")
	noOrphans()
	require.Equal(t, 1, d.count(`SELECT count(*) FROM runs WHERE service_name = 'svc_a' AND service_id IS NULL`))

	rows, err := d.pool.Query(d.ctx, `SELECT action || ' ' || outcome FROM audit_log ORDER BY id`)
	require.NoError(t, err)
	var audit []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		audit = append(audit, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"service add ok", "service add ok", "corpus add ok", "activate ok", "extend ok",
		"deactivate dry_run", "deactivate ok", "corpus delete dry_run", "corpus delete ok", "corpus delete refused",
		"service delete dry_run", "service delete ok"}, audit)
}

// sourceMaker makes source archives under dir: name/source.zip, with a main.tex.
func sourceMaker(t *testing.T, dir string) func(name string) string {
	return func(name string) string {
		p := filepath.Join(dir, name, "source.zip")
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		f, err := os.Create(p)
		require.NoError(t, err)
		zw := zip.NewWriter(f)
		w, err := zw.Create("main.tex")
		require.NoError(t, err)
		_, err = w.Write([]byte(name))
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		require.NoError(t, f.Close())
		return p
	}
}

// enqueuedRE is what a --detach prints.
var enqueuedRE = regexp.MustCompile(`job (\d+) enqueued \(([a-z_]+)\)`)

// TestLifecycleDetached: every lifecycle command takes --detach (issue 60: the CLI runs long
// operations in the foreground, or enqueues them): corpus add, activate, extend, deactivate,
// corpus delete and service delete each enqueue their job kind and return at once; a `cortexq
// jobs work` runner works them to the same end as the foreground commands, with no orphan left.
// A deletion still previews without --yes and enqueues nothing then; --batch with --detach is
// refused.
func TestLifecycleDetached(t *testing.T) {
	d, dir, source, runner := detachedSetup(t)
	tasksOf := func(service string) int {
		return d.count(`SELECT count(*) FROM tasks t JOIN services s ON s.id = t.service_id WHERE s.name = $1`, service)
	}
	detached := func(kind string, args ...string) { t.Helper(); runDetached(t, d, runner, kind, args...) }
	jobCount := func() int { return jobRows(d) }

	d.ok("service", "add", "svc_a")
	d.ok("service", "add", "svc_b")
	detached("import", "corpus", "add", "life", dir, "--service", "svc_a", "--detach")
	require.Equal(t, 2, tasksOf("svc_a"))
	detached("activate", "activate", "--corpus", "life", "--service", "svc_b", "--detach")
	require.Equal(t, 2, tasksOf("svc_b"))
	source("three")
	detached("extend", "extend", "--corpus", "life", "--detach")
	require.Equal(t, 3, tasksOf("svc_a"))
	require.Equal(t, 3, tasksOf("svc_b"))

	r := cortexq(t, d.env, "extend", "--corpus", "life", "--detach", "--batch", "10")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "--batch does not go with --detach")

	before := jobCount()
	require.Contains(t, d.ok("deactivate", "--corpus", "life", "--service", "svc_a", "--detach"), "dry run:")
	require.Equal(t, before, jobCount(), "a preview enqueues nothing")
	detached("deactivate", "deactivate", "--corpus", "life", "--service", "svc_a", "--detach", "--yes")
	require.Zero(t, tasksOf("svc_a"))
	detached("delete_corpus", "corpus", "delete", "life", "--detach", "--yes")
	require.Zero(t, tasksOf("svc_b"))
	detached("delete_service", "service", "delete", "svc_a", "--detach", "--yes")
	require.Zero(t, d.count(`SELECT count(*) FROM services WHERE name = 'svc_a'`))
	orphans, err := queuetest.Orphans(d.ctx, d.pool)
	require.NoError(t, err)
	require.Empty(t, orphans)
}

// detachedSetup is a test database, a directory of two source archives (one/, two/; source
// adds more) and a `cortexq jobs work` runner on the database, stopped at the test's end.
func detachedSetup(t *testing.T) (d *testDB, dir string, source func(name string) string, runner *childProc) {
	d = newTestDB(t)
	dir = t.TempDir()
	source = sourceMaker(t, dir)
	source("one")
	source("two")
	runner = jobRunnerProc(t, d, t.TempDir(), "r1")
	runner.start()
	t.Cleanup(func() { runner.stop(os.Interrupt, 10*time.Second) })
	return d, dir, source, runner
}

// jobRows counts the jobs enqueued.
func jobRows(d *testDB) int { return d.count(`SELECT count(*) FROM jobs`) }

// runDetached runs a --detach command, checks the job kind it enqueued and waits until runner
// completed the job.
func runDetached(t *testing.T, d *testDB, runner *childProc, kind string, args ...string) {
	t.Helper()
	out := d.ok(args...)
	m := enqueuedRE.FindStringSubmatch(out)
	require.NotNil(t, m, "a job enqueued: %s", out)
	require.Equal(t, kind, m[2])
	id, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	var j jobs.Job
	for i := 0; ; i++ {
		require.Less(t, i, 3000, "job %d (%s) not finished: %+v\n%s", id, kind, j, runner.log())
		j, err = jobs.Get(d.ctx, d.pool, id)
		require.NoError(t, err)
		if !j.Active() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, "completed", j.State, "%s\n%s", j.Error, runner.log())
}

// TestRerunVerifyPruneDetached: rerun, verify and prune take --detach too and enqueue their
// job kinds; rerun and prune preview without --yes and enqueue nothing then; flags a job cannot
// carry are refused.
func TestRerunVerifyPruneDetached(t *testing.T) {
	d, dir, _, runner := detachedSetup(t)
	jobCount := func() int { return jobRows(d) }
	runs := func() int { return d.count(`SELECT count(*) FROM runs`) }
	d.ok("service", "add", "svc")
	d.ok("corpus", "add", "c", dir, "--service", "svc")

	before, runsBefore := jobCount(), runs()
	require.Contains(t, d.ok("rerun", "--corpus", "c", "--service", "svc", "--detach"), "dry run:")
	require.Contains(t, d.ok("prune", "--keep", "2", "--detach"), "dry run")
	require.Equal(t, before, jobCount(), "previews enqueue nothing")
	runDetached(t, d, runner, "rerun", "rerun", "--corpus", "c", "--service", "svc", "--detach", "--yes", "--note", "again")
	require.Equal(t, runsBefore+1, runs(), "the rerun opened a run")
	runDetached(t, d, runner, "verify", "verify", "--corpus", "c", "--service", "svc", "--detach", "--quick")
	runDetached(t, d, runner, "prune", "prune", "--keep", "2", "--detach", "--yes")

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"rerun", "--corpus", "c", "--service", "svc", "--detach", "--yes", "--category", "x"}, "--detach takes a --severity slice"},
		{[]string{"verify", "--detach", "--requeue"}, "--detach does not go with --requeue"},
		{[]string{"prune", "--tables", "--detach", "--yes"}, "--detach prunes runs only"},
	} {
		r := cortexq(t, d.env, bad.args...)
		require.NotZero(t, r.code, "%v", bad.args)
		require.Contains(t, r.stderr, bad.want)
	}
	require.Equal(t, before+3, jobCount())
}
