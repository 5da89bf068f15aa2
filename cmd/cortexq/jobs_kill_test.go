package main

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/export"
	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/queuetest/resultcorpus"
)

// jobRunnerProc is a `cortexq jobs work` subprocess named name, beating every 200 ms.
func jobRunnerProc(t *testing.T, d *testDB, dir, name string) *childProc {
	return &childProc{t: t, name: name, bin: binary(t), logPath: filepath.Join(dir, name+".log"),
		args: []string{"--database-url", d.dsn, "jobs", "work", "--job-workers", "1", "--job-beat", "200ms", "--name", name}}
}

// killMidJob starts runner r1 on job id, kills it with SIGKILL once the job is running with some
// progress and not done, and starts r2 (another replica's runner, alive all along in production)
// to sweep and resume it. It returns the job once finished, and how long after the kill the job
// was taken up again.
func killMidJob(t *testing.T, d *testDB, dir string, id int64) (jobs.Job, time.Duration) {
	t.Helper()
	r1 := jobRunnerProc(t, d, dir, "r1")
	r1.start()
	defer r1.stop(os.Interrupt, 10*time.Second)
	var j jobs.Job
	var err error
	for i := 0; ; i++ {
		require.Less(t, i, 30000, "the job never got under way: %+v\n%s", j, r1.log())
		j, err = jobs.Get(d.ctx, d.pool, id)
		require.NoError(t, err)
		require.NotContains(t, []string{"completed", "failed", "cancelled"}, j.State, "finished before the kill: make the job bigger\n%s", r1.log())
		if j.State == "running" && j.Done > 0 && j.Done < j.Total {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	r1.kill9()
	killed := time.Now()
	t.Logf("killed r1 at %d of %d", j.Done, j.Total)
	r2 := jobRunnerProc(t, d, dir, "r2")
	r2.start()
	defer r2.stop(os.Interrupt, 10*time.Second)
	var resumed time.Duration
	for i := 0; ; i++ {
		require.Less(t, i, 6000, "job not finished after the kill: %+v\n%s", j, r2.log())
		j, err = jobs.Get(d.ctx, d.pool, id)
		require.NoError(t, err)
		if resumed == 0 && j.Attempts == 2 {
			resumed = time.Since(killed)
		}
		if !j.Active() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, "completed", j.State, "%s\n%s", j.Error, r2.log())
	require.Equal(t, int32(2), j.Attempts, "one attempt killed, one resumed")
	require.Equal(t, "r2", j.Runner)
	require.Contains(t, r2.log(), "stalled jobs interrupted and resumed")
	t.Logf("resumed %s after the kill (heartbeat timeout %.0f s)", resumed.Round(time.Millisecond), j.HeartbeatLimit)
	return j, resumed
}

// TestJobKill9MidImport kills the process running an import job mid-way: another runner marks
// it interrupted once its heartbeat is stale and resumes it from its cursor; every entry has one
// task, none twice, none missing.
func TestJobKill9MidImport(t *testing.T) {
	d := newTestDB(t)
	dir := t.TempDir()
	_, err := bench.EnsureService(d.ctx, d.root, "echo")
	require.NoError(t, err)
	const n = 100000
	list := filepath.Join(dir, "entries.txt")
	f, err := os.Create(list)
	require.NoError(t, err)
	for i := range n {
		fmt.Fprintf(f, "%s/c/%06d/src.zip\n", dir, i)
	}
	require.NoError(t, f.Close())
	args, err := json.Marshal(jobops.ImportArgs{Corpus: "big", Service: "echo", FromList: list, Batch: 1000})
	require.NoError(t, err)
	id, err := jobs.Enqueue(d.ctx, d.pool, jobops.Registry("test"), jobs.Request{Kind: jobops.KindImport, Args: args, Timeout: time.Second})
	require.NoError(t, err)
	j, _ := killMidJob(t, d, dir, id)
	require.Equal(t, int64(n), j.Done)
	var res jobops.ImportResult
	require.NoError(t, json.Unmarshal(j.Result, &res))
	require.Equal(t, int64(n), res.Entries)
	require.Equal(t, int64(n), res.Added+res.Existing)
	require.LessOrEqual(t, res.Existing, int64(1000), "at most the batch in flight at the kill is redone")
	require.Equal(t, n, d.count(`SELECT count(*) FROM tasks`))
	require.Equal(t, n, d.count(`SELECT count(DISTINCT entry) FROM tasks`))
	for _, i := range []int{0, n / 2, n - 1} {
		require.Equal(t, 1, d.count(`SELECT count(*) FROM tasks WHERE entry = $1`, fmt.Sprintf("%s/c/%06d/src.zip", dir, i)))
	}
}

// TestJobKill9MidExport kills the process running an export job mid-way: it is resumed, and the
// finished export holds each selected task's result once, its counts those of the report, with
// nothing the killed attempt wrote left behind.
func TestJobKill9MidExport(t *testing.T) {
	d := newTestDB(t)
	dir := t.TempDir()
	c := resultcorpus.Stage(d.ctx, t, d.pool, dir, "arxiv", "tex_to_html", 6000, 20000)
	out := filepath.Join(dir, "export")
	req := export.Request{Corpus: c.Name, Service: c.Service, Out: out, GroupBy: export.ByMonth,
		Severities: []string{"no_problem", "warning", "error", "fatal"}}
	args, err := json.Marshal(req)
	require.NoError(t, err)
	id, err := jobs.Enqueue(d.ctx, d.pool, jobops.Registry("test"), jobs.Request{Kind: jobops.KindExport, Args: args, Timeout: time.Second})
	require.NoError(t, err)
	j, _ := killMidJob(t, d, dir, id)
	require.Equal(t, int64(6000), j.Done)

	b, err := os.ReadFile(filepath.Join(out, export.ManifestName))
	require.NoError(t, err)
	var m export.Manifest
	require.NoError(t, json.Unmarshal(b, &m))
	statuses, err := d.root.Reports.ReportStatuses(d.ctx, queue.Scope{CorpusID: c.CorpusID, ServiceID: c.ServiceID})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"no_problem": statuses[queue.StatusNoProblem], "warning": statuses[queue.StatusWarning],
		"error": statuses[queue.StatusError], "fatal": statuses[queue.StatusFatal]}, m.Counts)
	seen := map[string]bool{}
	for _, a := range m.Archives {
		zr, err := zip.OpenReader(filepath.Join(out, a.Name))
		require.NoError(t, err, a.Name)
		for _, f := range zr.File {
			require.False(t, seen[f.Name], "%s twice", f.Name)
			seen[f.Name] = true
		}
		require.NoError(t, zr.Close())
	}
	require.Len(t, seen, 6000, "every task's result, none missing")
	ents, err := os.ReadDir(out)
	require.NoError(t, err)
	for _, e := range ents {
		require.False(t, strings.HasPrefix(e.Name(), "."), "left behind: %s", e.Name())
	}
	require.Len(t, ents, len(m.Archives)+1)
}
