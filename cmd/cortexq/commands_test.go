package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest/leasetest"
)

func TestImport(t *testing.T) {
	t.Run("ImportTwiceAddsEachSourceArchiveOnce", func(t *testing.T) {
		d := newTestDB(t)
		d.ok("service", "add", "echo")
		d.ok("service", "add", "tex_to_html")
		root := t.TempDir()
		for i := range 1000 {
			dir := filepath.Join(root, fmt.Sprintf("d%02d", i/100), fmt.Sprintf("p%04d", i))
			require.NoError(t, os.MkdirAll(dir, 0o755))
			touch(t, filepath.Join(dir, fmt.Sprintf("p%04d.zip", i)))
			if i%10 == 0 {
				// Results of both services, a sandbox's, and files that are no archive.
				touch(t, filepath.Join(dir, "echo.zip"))
				touch(t, filepath.Join(dir, "tex_to_html.zip"))
				touch(t, filepath.Join(dir, "echo.sandbox-12.zip"))
				touch(t, filepath.Join(dir, "notes.txt"))
			}
		}
		out := d.ok("import", "--corpus", "arxiv", "--service", "echo", root)
		require.Contains(t, out, "corpus arxiv (created), service echo: 1000 tasks added, 0 already present, 300 skipped")
		require.Contains(t, out, "opened a run")
		require.Equal(t, 1000, d.count(`SELECT count(*) FROM tasks`))
		require.Equal(t, 0, d.count(`SELECT count(*) FROM tasks WHERE entry NOT LIKE $1 || '/d__/p____/p____.zip'`, root))

		// Flags may follow the paths.
		out = d.ok("import", root, "--corpus", "arxiv", "--service", "echo")
		require.Contains(t, out, "service echo: 0 tasks added, 1000 already present")
		require.NotContains(t, out, "opened a run")
		require.Equal(t, 1000, d.count(`SELECT count(*) FROM tasks`))
		require.Equal(t, 1, d.count(`SELECT count(*) FROM runs WHERE ended_at IS NULL`))
		var path string
		require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT path FROM corpora WHERE name = 'arxiv'`).Scan(&path))
		require.Equal(t, root, path)

		// Another service's tasks of the same corpus are its own.
		out = d.ok("import", "--corpus", "arxiv", "--service", "tex_to_html", filepath.Join(root, "d00"))
		require.Contains(t, out, "service tex_to_html: 100 tasks added")
		require.Equal(t, 1100, d.count(`SELECT count(*) FROM tasks`))
	})

	t.Run("FromListAddsOnlyNewEntries", func(t *testing.T) {
		d := newTestDB(t)
		d.ok("service", "add", "echo")
		out := d.importList("c", "echo", entries("a", 10)...)
		require.Contains(t, out, "10 tasks added, 0 already present")
		list := append(entries("a", 15), "/corpus/a1/echo.zip", "/corpus/a1/echo.sandbox-3.zip", "/corpus/a1/readme", "")
		out = d.importList("c", "echo", list...)
		require.Contains(t, out, "5 tasks added, 10 already present, 3 skipped")
		require.Equal(t, 15, d.count(`SELECT count(*) FROM tasks WHERE status = 0 AND run = 1`))
	})
}

func TestImportStaysBeneathTheCorpusPath(t *testing.T) {
	t.Run("SymlinkOutOfTheCorpusIsRefused", func(t *testing.T) {
		d := newTestDB(t)
		d.ok("service", "add", "echo")
		root, outside := t.TempDir(), t.TempDir()
		secret := filepath.Join(outside, "secret")
		touch(t, secret)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "a"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(root, "b"), 0o755))
		touch(t, filepath.Join(root, "b", "source.zip"))
		require.NoError(t, os.Symlink(secret, filepath.Join(root, "a", "source.zip")))
		r := cortexq(t, d.env, "import", "--corpus", "c", "--service", "echo", root)
		oneLineFailure(t, r, filepath.Join(root, "a", "source.zip")+" is a symbolic link to "+secret)
		require.Contains(t, r.stderr, "refused, nothing imported")
		require.Equal(t, 0, d.count(`SELECT count(*) FROM tasks`))
		require.Equal(t, 0, d.count(`SELECT count(*) FROM corpora`), "nothing kept of the refused import")
	})

	t.Run("SymlinkWithinTheCorpusIsImported", func(t *testing.T) {
		d := newTestDB(t)
		d.ok("service", "add", "echo")
		root := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(root, "a"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(root, "b"), 0o755))
		touch(t, filepath.Join(root, "b", "real.zip"))
		require.NoError(t, os.Symlink("../b/real.zip", filepath.Join(root, "a", "source.zip")))
		out := d.ok("import", "--corpus", "c", "--service", "echo", root)
		require.Contains(t, out, "2 tasks added")
	})

	t.Run("EntryOutsideAnExistingCorpusIsRefused", func(t *testing.T) {
		d := newTestDB(t)
		d.ok("service", "add", "echo")
		first, second := t.TempDir(), t.TempDir()
		touch(t, filepath.Join(first, "one.zip"))
		touch(t, filepath.Join(second, "two.zip"))
		require.Contains(t, d.ok("import", "--corpus", "c", "--service", "echo", first), "1 tasks added")
		r := cortexq(t, d.env, "import", "--corpus", "c", "--service", "echo", second)
		oneLineFailure(t, r, filepath.Join(second, "two.zip")+" is not beneath the path \""+first+"\" of corpus c")
		require.Equal(t, 1, d.count(`SELECT count(*) FROM tasks`))

		// Two PATHs of a new corpus: its path is the directory holding both.
		out := d.ok("import", "--corpus", "both", "--service", "echo", first, second)
		require.Contains(t, out, "2 tasks added")
		var path string
		require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT path FROM corpora WHERE name = 'both'`).Scan(&path))
		require.Equal(t, filepath.Dir(first), path)
	})
}

// TestMigrationGivesCorporaAPathHoldingTheirEntries: corpora made before entries had to lie
// beneath their path get one that holds them all, so that replicas still serve their tasks.
func TestMigrationGivesCorporaAPathHoldingTheirEntries(t *testing.T) {
	d := newTestDB(t)
	d.ok("migrate", "down", "6")
	var svc int32
	require.NoError(t, d.pool.QueryRow(d.ctx, `INSERT INTO services (name) VALUES ('echo') RETURNING id`).Scan(&svc))
	want := map[string]string{}
	for _, c := range []struct {
		name, path string
		entries    []string
		want       string
	}{
		{"single", "/corpus/a0/a0.zip", []string{"/corpus/a0/a0.zip"}, "/corpus/a0"},
		{"list", "/home/op/lists", []string{"/corpus/b1/b1.zip", "/corpus/b10/b10.zip"}, "/corpus"},
		{"empty", "", []string{"/data/x/y.zip", "/data/x/z/z.zip"}, "/data/x"},
		{"fine", "/corpus/", []string{"/corpus/c/c.zip"}, "/corpus/"},
		{"root", "/", []string{"/corpus/d/d.zip"}, "/"},
		{"none", "/nowhere", nil, "/nowhere"},
	} {
		var id int32
		require.NoError(t, d.pool.QueryRow(d.ctx, `INSERT INTO corpora (name, path) VALUES ($1, $2) RETURNING id`, c.name, c.path).Scan(&id))
		for _, e := range c.entries {
			_, err := d.pool.Exec(d.ctx, `INSERT INTO tasks (corpus_id, service_id, entry) VALUES ($1, $2, $3)`, id, svc, e)
			require.NoError(t, err)
		}
		want[c.name] = c.want
	}
	d.ok("migrate", "up")
	for name, path := range want {
		var got string
		require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT path FROM corpora WHERE name = $1`, name).Scan(&got))
		require.Equal(t, path, got, "corpus %s", name)
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, nil, 0o644))
}

func TestRerun(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 3)...)
	sc := d.scope("c", "echo")
	leases := d.lease(sc.ServiceID, "w0", "w1")
	fatal := leases[0].TaskID
	inFlight := leases[1].TaskID
	dec := d.claim(lease.Result{TaskID: fatal, Worker: "w0", Kind: lease.KindReport, Status: queue.StatusFatal,
		Messages: []queue.Message{{Severity: queue.SeverityFatal, Category: "latex", What: "missing_file", Details: "x.sty"}}})
	require.Equal(t, lease.OutcomeAccepted, dec.Outcome)

	// A filter that matches nothing reruns nothing.
	out := d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo", "--severity", "fatal", "--category", "latex", "--what", "other")
	require.Contains(t, out, "0 tasks back to TODO")
	// The fatal task only: previewed first (changing nothing), then done, exactly as previewed.
	before := d.count(`SELECT count(*) FROM runs`)
	out = d.ok("rerun", "--corpus", "c", "--service", "echo", "--severity", "fatal", "--category", "latex", "--what", "missing_file")
	require.Contains(t, out, "dry run: corpus c, service echo: 1 tasks would go back to TODO (run ")
	require.Contains(t, out, "nothing changed (add --yes to do it)")
	require.Equal(t, 1, d.count(`SELECT count(*) FROM tasks WHERE id = $1 AND status = $2 AND run = 1`, fatal, int16(queue.StatusFatal)))
	require.Equal(t, before, d.count(`SELECT count(*) FROM runs`))
	out = d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo", "--severity", "fatal", "--category", "latex", "--what", "missing_file")
	require.Contains(t, out, "1 tasks back to TODO in a new run; 0 leases of old runs settled")
	require.Equal(t, 1, d.count(`SELECT count(*) FROM tasks WHERE id = $1 AND status = 0 AND run = 2`, fatal))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM task_messages WHERE task_id = $1`, fatal))

	// Everything: the leased task's run settles, and its worker's late result is stale.
	require.Contains(t, d.ok("rerun", "--corpus", "c", "--service", "echo"), ": 3 tasks would go back to TODO")
	require.Equal(t, 1, d.count(`SELECT count(*) FROM tasks WHERE id = $1 AND run = 1`, inFlight))
	out = d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo", "--note", "all again")
	require.Contains(t, out, "3 tasks back to TODO in a new run; 1 leases of old runs settled")
	require.Equal(t, 3, d.count(`SELECT count(*) FROM tasks WHERE status = 0`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM tasks WHERE id = $1 AND run = 3`, fatal))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM tasks WHERE id = $1 AND run = 2`, inFlight))
	dec = d.claim(lease.Result{TaskID: inFlight, Worker: "w1", Kind: lease.KindReport, Status: queue.StatusNoProblem})
	require.Equal(t, lease.OutcomeStale, dec.Outcome)
	require.Equal(t, 1, d.count(`SELECT count(*) FROM tasks WHERE id = $1 AND status = 0 AND run = 2`, inFlight))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM runs WHERE ended_at IS NULL`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM runs WHERE note = 'all again' AND ended_at IS NULL`))

	r := cortexq(t, d.env, "rerun", "--corpus", "c", "--service", "echo", "--severity", "bad")
	oneLineFailure(t, r, `--severity "bad": want one of error, fatal, invalid, no_problem, warning`)
}

func TestPauseResume(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 5)...)
	sc := d.scope("c", "echo")
	leased := d.lease(sc.ServiceID, "w0")[0]
	// A replica holds two tasks reserved: status counts them, and the pause takes them back.
	reserved, err := d.store.Reserve(d.ctx, lease.ReserveRequest{ServiceID: sc.ServiceID, Max: 2})
	require.NoError(t, err)
	require.Len(t, reserved, 2)
	require.Regexp(t, statusRow("c", "echo", 5, 2, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1), d.ok("status"))

	out := d.ok("pause", "--corpus", "c", "--service", "echo")
	require.Contains(t, out, "paused, 4 TODO tasks blocked; 2 reservations taken back from replicas (2 tasks blocked, 0 retries queued again)")
	require.Equal(t, 4, d.count(`SELECT count(*) FROM tasks WHERE status = -6`))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM dispatch WHERE state = 'reserved'`))
	leases, err := leasetest.Lease(d.ctx, d.store, leasetest.Request{ServiceID: sc.ServiceID, Workers: []string{"w1"}})
	require.NoError(t, err)
	require.Empty(t, leases, "nothing of a paused corpus is leased")
	require.Equal(t, 0, d.count(`SELECT count(*) FROM dispatch WHERE state = 'reserved'`), "nor reserved")
	// Leased work finishes.
	require.Equal(t, lease.OutcomeAccepted, d.claim(lease.Result{TaskID: leased.TaskID, Worker: "w0",
		Kind: lease.KindReport, Status: queue.StatusNoProblem}).Outcome)
	require.Regexp(t, statusRow("c", "echo", 5, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 4, 1, 1), d.ok("status"))

	out = d.ok("resume", "--corpus", "c", "--service", "echo")
	require.Contains(t, out, "resumed, 4 tasks back to TODO")
	require.Equal(t, 4, d.count(`SELECT count(*) FROM tasks WHERE status = 0`))
	require.Len(t, d.lease(sc.ServiceID, "w1", "w2"), 2)

	r := cortexq(t, d.env, "pause", "--corpus", "nope", "--service", "echo")
	oneLineFailure(t, r, "corpus nope: not found")
}

// statusRow matches the status line of a corpus and service with the given numbers: tasks,
// todo, reserved, in flight, settling, queued, dead letters, no_problem, warning, error, fatal, invalid,
// blocked, replies over the last minute.
func statusRow(corpus, service string, n ...int) *regexp.Regexp {
	parts := []string{regexp.QuoteMeta(corpus), regexp.QuoteMeta(service)}
	for _, x := range n {
		parts = append(parts, fmt.Sprint(x))
	}
	// The last column is the corpus's share of its service's leases over the last minute.
	return regexp.MustCompile(`(?m)^\s*` + strings.Join(parts, `\s+`) + `\s+\d+\.\d%\s*$`)
}

func TestStatusAndTaskShow(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.ok("service", "add", "other")
	d.importList("c", "echo", entries("t", 4)...)
	d.importList("c", "other", entries("t", 2)...)
	require.Contains(t, d.ok("status", "--service", "other"), "other")
	require.NotContains(t, d.ok("status", "--service", "other"), "echo")

	sc := d.scope("c", "echo")
	leases := d.lease(sc.ServiceID, "w0", "w1")
	done, running := leases[0].TaskID, leases[1].TaskID
	require.Equal(t, lease.OutcomeAccepted, d.claim(lease.Result{TaskID: done, Worker: "w0", Kind: lease.KindReport,
		Status: queue.StatusWarning, Messages: []queue.Message{
			{Severity: queue.SeverityWarning, Category: "latex", What: "overfull", Details: "hbox 3pt"}}}).Outcome)

	out := d.ok("status")
	require.Contains(t, out, "TODO")
	require.Regexp(t, statusRow("c", "echo", 4, 2, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2), out)
	require.Regexp(t, statusRow("c", "other", 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), out)

	out = d.ok("task", "show", fmt.Sprint(done))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^task\s+` + fmt.Sprint(done) + `$`),
		regexp.MustCompile(`(?m)^corpus\s+c \(id \d+\)$`),
		regexp.MustCompile(`(?m)^service\s+echo \(id \d+\)$`),
		regexp.MustCompile(`(?m)^status\s+warning \(-2\)$`),
		regexp.MustCompile(`(?m)^dispatch rows \(0\)$`),
		regexp.MustCompile(`(?m)^attempts \(1\)$`),
		regexp.MustCompile(`(?m)^1\s+0\s+w0\s+r1\s+\S+ \S+ UTC\s+\S+ \S+ UTC\s+\d+\.\d{3}\s+accepted\s+warning$`),
		regexp.MustCompile(`(?m)^1\s+warning\s+latex\s+overfull\s+hbox 3pt$`),
	} {
		require.Regexp(t, want, out)
	}
	out = d.ok("task", "show", fmt.Sprint(running))
	require.Regexp(t, `(?m)^1\s+in_flight\s+w1\s+0\s+false\s+false\s+false\s+-\s+1h0m0s\s`, out)
	require.Regexp(t, `(?m)^1\s+0\s+w1\s+r1\s+\S+ \S+ UTC\s+-\s+-\s+running\s+-$`, out)
	require.Contains(t, out, "messages (0)")

	// --watch ends by itself once nothing is left to lease or running.
	require.Equal(t, lease.OutcomeAccepted, d.claim(lease.Result{TaskID: running, Worker: "w1",
		Kind: lease.KindReport, Status: queue.StatusNoProblem}).Outcome)
	for _, l := range d.lease(sc.ServiceID, "w2", "w3") {
		d.claim(lease.Result{TaskID: l.TaskID, Worker: l.Worker, Kind: lease.KindReport, Status: queue.StatusError})
	}
	out = d.ok("status", "--watch", "--interval", "50ms", "--service", "echo")
	require.Regexp(t, statusRow("c", "echo", 4, 0, 0, 0, 0, 0, 0, 1, 1, 2, 0, 0, 0, 4, 4), out)
	require.Contains(t, out, "c/echo  ["+strings.Repeat("#", 40)+"] 100.0%  4/4  done")

	r := cortexq(t, d.env, "task", "show", "99999")
	oneLineFailure(t, r, "task 99999: no such task")
}

func TestDeadLettersInStatus(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 1)...)
	sc := d.scope("c", "echo")
	// Every attempt expires: three leases, then the reaper dead-letters the task.
	for _, w := range []string{"w0", "w1", "w2"} {
		d.lease(sc.ServiceID, w)
		_, err := d.pool.Exec(d.ctx, `UPDATE dispatch SET deadline = now() - interval '1 second'`)
		require.NoError(t, err)
		_, err = d.store.Reap(d.ctx, 0)
		require.NoError(t, err)
	}
	require.Equal(t, 1, d.count(`SELECT count(*) FROM tasks WHERE status = -4`))
	require.Regexp(t, statusRow("c", "echo", 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 3), d.ok("status"))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_dead_letters WHERE workers = '{w0,w1,w2}' AND cause = 'cortex/never_completed_with_retries' AND held`))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM audit_late_results WHERE dead_lettered AND finished_status IS NULL`))
}

func TestMigrate(t *testing.T) {
	d := newTestDB(t)
	out := d.ok("migrate", "status")
	require.Regexp(t, `(?m)^00001\s+applied\s+.*00001_schema.sql$`, out)
	require.Regexp(t, `(?m)^00003\s+applied\s+.*00003_audit_views.sql$`, out)
	require.Contains(t, d.ok("migrate", "up"), "nothing to apply")
	// Down to River's tables (version 2) and up again, whatever migrations follow the views.
	require.Contains(t, d.ok("migrate", "down", "2"), "down 00003 00003_audit_views.sql")
	require.Equal(t, 0, d.count(`SELECT count(*) FROM pg_views WHERE viewname LIKE 'audit_%'`))
	require.Regexp(t, `(?m)^00003\s+pending\s+-\s+00003_audit_views.sql$`, d.ok("migrate", "status"))
	require.Contains(t, d.ok("migrate", "up"), "up 00003 00003_audit_views.sql")
	require.Equal(t, 8, d.count(`SELECT count(*) FROM pg_views WHERE viewname LIKE 'audit_%'`))
	require.Contains(t, d.ok("migrate", "up", "--wait", "5s"), "nothing to apply")
}

func TestMigrateDownRefusesToDropRecords(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	r := cortexq(t, d.env, "migrate", "down", "0")
	oneLineFailure(t, r, "migrate down: nothing rolled back: it would drop services (1 rows, dropped by rolling back 00001); give --yes")
	require.Regexp(t, `(?m)^00001\s+applied`, d.ok("migrate", "status"))
	require.Equal(t, 1, d.count(`SELECT count(*) FROM services`))
	// Rolling back what holds no records needs no --yes: the worker keys table is empty.
	require.Contains(t, d.ok("migrate", "down", "3"), "down 00004 00004_worker_keys.sql")
	require.Contains(t, d.ok("migrate", "down", "0", "--yes"), "down 00001 00001_schema.sql")
	require.Equal(t, 0, d.count(`SELECT count(*) FROM pg_tables WHERE tablename = 'services'`))
}

func TestBadInputFailsWithOneLine(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	wrongDB := []string{"DATABASE_URL=postgres://nobody@127.0.0.1:1/x"}
	t.Run("Cases", func(cases *testing.T) { // returns when every parallel case is done
		for _, tc := range []struct {
			name string
			env  []string
			args []string
			want string
		}{
			{"UnknownFlag", d.env, []string{"import", "--nope"}, "flag provided but not defined: -nope (see cortexq import --help)"},
			{"UnknownFlagAfterArgument", d.env, []string{"service", "add", "x", "--nope"}, "flag provided but not defined: --nope"},
			{"UnknownGlobalFlag", d.env, []string{"--nope", "status"}, "flag provided but not defined: -nope (see cortexq --help)"},
			{"BadFlagValue", d.env, []string{"status", "--interval", "soon"}, `invalid value "soon" for flag -interval`},
			{"BadLogLevel", d.env, []string{"--log-level", "loud", "status"}, `--log-level "loud"`},
			{"UnknownCommand", d.env, []string{"frobnicate"}, `unknown command "frobnicate" (see cortexq --help)`},
			{"UnknownSubcommand", d.env, []string{"migrate", "sideways"}, `unknown command "sideways" (see cortexq migrate --help)`},
			{"MissingFlag", d.env, []string{"import", "/tmp"}, "--corpus is required"},
			{"MissingPath", d.env, []string{"import", "--corpus", "c", "--service", "echo", "/no/such/dir"}, "import: /no/such/dir: no such file or directory"},
			{"MissingList", d.env, []string{"import", "--corpus", "c", "--service", "echo", "--from-list", "/no/such/list"}, "no such file or directory"},
			{"UnknownService", d.env, []string{"import", "--corpus", "c", "--service", "nope", "/tmp"}, "unknown service nope"},
			{"DuplicateService", d.env, []string{"service", "add", "echo"}, "service echo already exists"},
			{"BadTaskID", d.env, []string{"task", "show", "abc"}, `task ID "abc"`},
			{"ImportFindsNothing", d.env, []string{"import", "--corpus", "typo", "--service", "echo", d.t.TempDir()}, "no source archives in "},
			{"ImportPathsAndList", d.env, []string{"import", "--corpus", "c", "--service", "echo", "--from-list", "/dev/null", "/tmp"}, "give PATHs to walk or --from-list, not both"},
			{"ImportCorpusNameWithNewline", d.env, []string{"import", "--corpus", "bad\nname", "--service", "echo", "/tmp"}, "has a control character"},
			{"ServeNoInFlight", d.env, []string{"serve", "--max-in-flight", "0"}, "--max-in-flight 0: want at least 1"},
			{"ServeZeroLease", d.env, []string{"serve", "--lease-timeout", "0"}, "--lease-timeout 0s: want at least 1s"},
			{"ServeNoMessages", d.env, []string{"serve", "--max-messages", "0"}, "--max-messages 0: want 1 to 100000"},
			{"ServeTooManyMessages", d.env, []string{"serve", "--max-messages", "100001"}, "--max-messages 100001: want 1 to 100000"},
			{"StatusUnknownCorpus", d.env, []string{"status", "--corpus", "nope"}, "corpus nope: not found"},
			{"StatusWatchUnknownService", d.env, []string{"status", "--watch", "--service", "nope"}, "service nope: not found"},
			{"DBStartWithDatabaseURL", wrongDB, []string{"db", "start"}, "--database-url (or $DATABASE_URL) is set"},
			{"WrongDatabaseURL", wrongDB, []string{"status"}, "connect to the database: failed to connect"},
			{"WrongDatabaseURLMigrate", wrongDB, []string{"migrate", "status"}, "connect to the database: failed to connect"},
			{"WrongDatabaseURLImport", wrongDB, []string{"import", "--corpus", "c", "--service", "echo", "/tmp"}, "connect to the database"},
			{"BadDatabaseURL", []string{"DATABASE_URL=postgres://u:secret@[bad"}, []string{"status"}, "cannot parse"},
		} {
			cases.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := cortexq(t, tc.env, tc.args...)
				oneLineFailure(t, r, tc.want)
				require.NotContains(t, r.stderr, "secret")
			})
		}
	})
	require.Equal(t, 0, d.count(`SELECT count(*) FROM corpora`), "no corpus made by a failed import")
}

// Run where no embedded cluster is (the wrong directory, a mistyped --home), a command that
// only reads says so, rather than creating an empty cluster and reporting it empty.
func TestReadOnlyCommandsDoNotCreateACluster(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	env := []string{"CORTEXQ_HOME=" + home}
	for _, args := range [][]string{
		{"status"}, {"task", "show", "1"}, {"service", "list"}, {"keys", "list"},
		{"migrate", "status"}, {"migrate", "down"}, {"db", "url"}, {"db", "psql", "-c", "SELECT 1"},
		{"report", "--corpus", "c", "--service", "s"}, {"runs", "--corpus", "c", "--service", "s"},
		{"diff", "--corpus", "c", "--service", "s"}, {"sandbox", "list"}, {"audit"}, {"token", "list"},
	} {
		r := cortexq(t, env, args...)
		oneLineFailure(t, r, "no embedded PostgreSQL in "+home+`: "cortexq `+args[0])
		_, err := os.Stat(home)
		require.ErrorIs(t, err, os.ErrNotExist, "cortexq %v made %s", args, home)
	}
}

// TestHelpNamesEveryFlag checks that the help of the app and of each command names each of its
// flags with its environment variable, and its default where it has one.
func TestHelpNamesEveryFlag(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, path []string, flags []cli.Flag) {
		out := cortexq(t, nil, append(path, "--help")...)
		require.Equal(t, 0, out.code, out.stderr)
		i := strings.LastIndex(out.stdout, "OPTIONS:\n")
		require.GreaterOrEqual(t, i, 0, "%v --help lists options:\n%s", path, out.stdout)
		options := out.stdout[i:]
		for _, f := range flags {
			if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
				continue // hidden on purpose
			}
			doc, ok := f.(cli.DocGenerationFlag)
			require.True(t, ok)
			name := f.Names()[0]
			line := regexp.MustCompile(`(?m)^[ \t]+--` + regexp.QuoteMeta(name) + `\b.*$`).FindString(options)
			require.NotEmpty(t, line, "%v --help names --%s:\n%s", path, name, out.stdout)
			if name == "help" {
				continue
			}
			envs := doc.GetEnvVars()
			require.NotEmpty(t, envs, "--%s has an environment variable", name)
			for _, e := range envs {
				require.True(t, strings.HasPrefix(e, "CORTEXQ_") || e == "DATABASE_URL", e)
				require.Contains(t, line, "$"+e)
			}
			if v := doc.GetValue(); v != "" && v != `""` {
				require.Contains(t, line, "(default: ", "--%s shows its default", name)
			}
		}
	}
	check(t, nil, newApp().Flags)
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(append([]string(nil), path...), c.Name)
			if c.SkipFlagParsing && len(c.Flags) == 0 {
				continue // db psql hands its arguments, --help included, to psql
			}
			t.Run(strings.Join(p, "_"), func(t *testing.T) {
				t.Parallel()
				check(t, p, c.Flags)
			})
			walk(p, c.Subcommands)
		}
	}
	walk(nil, commands())
}

func TestStatusReportsBrokenInvariantsLoudly(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("a", 3)...)
	require.Contains(t, d.ok("status"), "echo", "a sound state passes quietly")
	// A dispatched task without any dispatch row: stranded, as no transition ever leaves it.
	_, err := d.pool.Exec(d.ctx, `UPDATE tasks SET status = 1 WHERE id = (SELECT min(id) FROM tasks)`)
	require.NoError(t, err)
	r := cortexq(t, d.env, "status")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "INVARIANT VIOLATED")
	require.Contains(t, r.stderr, "DispatchedTaskHasOneActiveRow: 1 rows")
}

func TestNewerSchemaIsSaid(t *testing.T) {
	d := newTestDB(t)
	_, err := d.pool.Exec(d.ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99, true)`)
	require.NoError(t, err)
	r := cortexq(t, d.env, "status")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "the database schema is newer than this binary")
	require.Contains(t, r.stderr, "schema_version=99")
}

// cortexq sweep removes, in every corpus, the leftovers older than --older-than, and with
// --replica every leftover of that (stopped) replica; --dry-run lists them and removes nothing.
func TestSweepCommand(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	root := t.TempDir()
	dir := filepath.Join(root, "p1")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	touch(t, filepath.Join(dir, "p1.zip"))
	d.ok("import", "--corpus", "c", "--service", "echo", root)
	old := time.Now().Add(-48 * time.Hour)
	oldTmp := filepath.Join(dir, ".echo.zip.tmp-gone.0a0b0c0d-ff")
	stoppedPrev := filepath.Join(dir, ".echo.zip.prev-replica-3.0a0b0c0d-1-ff")
	liveTmp := filepath.Join(dir, ".echo.zip.tmp-replica-1.0a0b0c0d-ff")
	for _, p := range []string{oldTmp, stoppedPrev, liveTmp} {
		touch(t, p)
	}
	require.NoError(t, os.Chtimes(oldTmp, old, old))

	out := d.ok("sweep", "--dry-run")
	require.Equal(t, "would remove "+oldTmp+"\n", out)
	require.FileExists(t, oldTmp)
	require.Equal(t, "removed "+stoppedPrev+"\nremoved "+oldTmp+"\n", d.ok("sweep", "--replica", "replica-3"), "in walk (lexical) order")
	require.NoFileExists(t, oldTmp)
	require.NoFileExists(t, stoppedPrev)
	require.FileExists(t, liveTmp)
	require.FileExists(t, filepath.Join(dir, "p1.zip"))
}
