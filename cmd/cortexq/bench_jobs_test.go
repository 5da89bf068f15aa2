package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/export"
	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/resultcorpus"
	"github.com/cortexq/cortexq/queue/web"
)

func benchEnvInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// benchDB is a fresh migrated database with the echo service.
func benchDB(b *testing.B) (string, *pgxpool.Pool) {
	b.Helper()
	dsn := queuetest.ConnString(b)
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	_, err = bench.EnsureService(context.Background(), base.New(pool, nil, nil), "echo")
	require.NoError(b, err)
	return dsn, pool
}

// BenchmarkImportJobVsCLI adds a corpus of N source archives (CORTEXQ_BENCH_IMPORT_N, default
// 20,000; empty files, 1,000 a directory, made once before the timing) two ways, each into a
// fresh database, in turn (each first every other pair): with `cortexq corpus add` in the
// foreground, and through the API, POST /api/v1/corpora, which enqueues an import job that a
// `cortexq jobs work` subprocess works, timed from the request to the job's completion as GET
// /api/v1/jobs/{id} reports it. It reports both times and their ratio (the goal: job/cli <= 1.2;
// docs/performance.md#import-as-a-job).
func BenchmarkImportJobVsCLI(b *testing.B) {
	n := benchEnvInt("CORTEXQ_BENCH_IMPORT_N", 20000)
	bin := binary(b)
	tree := filepath.Join(b.TempDir(), "c")
	for i := range n {
		d := filepath.Join(tree, fmt.Sprintf("%04d", i/1000))
		if i%1000 == 0 {
			require.NoError(b, os.MkdirAll(d, 0o755))
		}
		require.NoError(b, os.WriteFile(filepath.Join(d, fmt.Sprintf("%07d.zip", i)), nil, 0o644))
	}
	var cliTotal, jobTotal time.Duration
	cliImport := func() {
		dsn, pool := benchDB(b)
		settle(b, pool)
		start := time.Now()
		out, err := exec.Command(bin, "--database-url", dsn, "corpus", "add", "c", tree, "--service", "echo").CombinedOutput()
		require.NoError(b, err, "%s", out)
		cliTotal += time.Since(start)
		require.Contains(b, string(out), fmt.Sprintf(" %d tasks added", n))
		settle(b, pool) // its rows vacuumed and checkpointed now, not during the job's turn
	}
	// In turn, each first every other time: the machine's other load drifts.
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			cliImport()
			jobTotal += importJobViaAPI(b, bin, tree, n)
		} else {
			jobTotal += importJobViaAPI(b, bin, tree, n)
			cliImport()
		}
		b.Logf("pair %d: cli %.1f s, job %.1f s in all", i+1, cliTotal.Seconds(), jobTotal.Seconds())
	}
	cli, job := cliTotal.Seconds()/float64(b.N), jobTotal.Seconds()/float64(b.N)
	b.ReportMetric(cli, "cli_s")
	b.ReportMetric(job, "job_s")
	b.ReportMetric(job/cli, "job/cli")
	b.ReportMetric(float64(n), "entries")
}

// settle vacuums and analyzes the tasks of pool's database and checkpoints the cluster, so that
// neither import pays for the work the other left (autovacuum of fresh rows, dirty pages).
func settle(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	for _, sql := range []string{"VACUUM (ANALYZE) tasks", "CHECKPOINT"} {
		_, err := pool.Exec(context.Background(), sql)
		require.NoError(b, err, sql)
	}
}

// importJobViaAPI adds the corpus at tree through the API (an import job) and returns the time
// from the request to the job's completion, having checked that it added n tasks.
func importJobViaAPI(b *testing.B, bin, tree string, n int) time.Duration {
	b.Helper()
	dsn, pool := benchDB(b)
	settle(b, pool)
	root := base.New(pool, nil, nil)
	const tok = "bench-admin-token-0123456789abcdef"
	srv, err := web.New(web.Config{Base: root, Store: root.Lease(lease.Config{}), AdminToken: tok, Jobs: jobops.Registry("bench")})
	require.NoError(b, err)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	runner := exec.Command(bin, "--database-url", dsn, "jobs", "work", "--job-workers", "1")
	runner.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(b, runner.Start())
	defer func() {
		_ = runner.Process.Signal(os.Interrupt)
		_ = runner.Wait()
	}()
	time.Sleep(time.Second) // the runner connected and polling, as a replica's runner is
	body, err := json.Marshal(map[string]any{"name": "c", "path": tree, "service": "echo"})
	require.NoError(b, err)
	start := time.Now()
	req, err := http.NewRequest("POST", hs.URL+"/api/v1/corpora", bytes.NewReader(body))
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	var acc struct {
		ID   int64  `json:"id"`
		Href string `json:"href"`
	}
	require.NoError(b, json.NewDecoder(resp.Body).Decode(&acc))
	require.NoError(b, resp.Body.Close())
	require.Equal(b, http.StatusAccepted, resp.StatusCode)
	for i := 0; ; i++ {
		require.Less(b, i, 72000, "the job did not finish in an hour")
		resp, err := http.Get(hs.URL + acc.Href)
		require.NoError(b, err)
		var j struct {
			State, Error string
			Result       struct{ Added int }
		}
		require.NoError(b, json.NewDecoder(resp.Body).Decode(&j))
		require.NoError(b, resp.Body.Close())
		if j.State == "completed" {
			took := time.Since(start)
			require.Equal(b, n, j.Result.Added)
			settle(b, pool)
			return took
		}
		require.NotContains(b, []string{"failed", "cancelled"}, j.State, j.Error)
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkExport exports a corpus of CORTEXQ_BENCH_EXPORT_N tasks (default 10,000) with results
// of about 20 KB of HTML by month, in this process, and reports the MB/s written and the peak
// heap in use (sampled every 10 ms) beside the archives' total.
func BenchmarkExport(b *testing.B) {
	n := benchEnvInt("CORTEXQ_BENCH_EXPORT_N", 10000)
	_, pool := benchDB(b)
	dir := b.TempDir()
	c := resultcorpus.Stage(context.Background(), b, pool, dir, "arxiv", "tex_to_html", n, 20000)
	var bytesOut int64
	var took time.Duration
	var peak uint64
	for b.Loop() {
		out := filepath.Join(dir, fmt.Sprintf("out-%d", time.Now().UnixNano()))
		stop := make(chan struct{})
		sampled := make(chan uint64)
		go func() {
			var m runtime.MemStats
			var top uint64
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				runtime.ReadMemStats(&m)
				top = max(top, m.HeapInuse)
				select {
				case <-stop:
					sampled <- top
					return
				case <-t.C:
				}
			}
		}()
		start := time.Now()
		sum, err := export.Run(context.Background(), pool, export.Request{Corpus: c.Name, Service: c.Service, Out: out,
			GroupBy: export.ByMonth, Severities: []string{"no_problem", "warning", "error", "fatal"}})
		took += time.Since(start)
		close(stop)
		peak = max(peak, <-sampled)
		require.NoError(b, err)
		bytesOut += sum.Bytes
	}
	b.ReportMetric(float64(bytesOut)/1e6/took.Seconds(), "MB/s")
	b.ReportMetric(float64(peak)/1e6, "peak_heap_MB")
	b.ReportMetric(float64(bytesOut)/1e6/float64(b.N), "archive_MB")
}
