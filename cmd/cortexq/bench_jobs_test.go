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

// BenchmarkImportJobVsCLI imports N entries (CORTEXQ_BENCH_IMPORT_N, default 20,000) from a list,
// first with `cortexq import` in the foreground, then, into another fresh database, as a job
// enqueued through POST /api/v1/jobs and worked by a `cortexq jobs work` subprocess, timed from
// the request to the job's completion as GET /api/v1/jobs/{id} reports it. It reports both times
// and their ratio (the goal: job/cli <= 1.2).
func BenchmarkImportJobVsCLI(b *testing.B) {
	n := benchEnvInt("CORTEXQ_BENCH_IMPORT_N", 20000)
	bin := binary(b)
	dir := b.TempDir()
	list := filepath.Join(dir, "entries.txt")
	var buf bytes.Buffer
	for i := range n {
		fmt.Fprintf(&buf, "%s/c/%07d/src.zip\n", dir, i)
	}
	require.NoError(b, os.WriteFile(list, buf.Bytes(), 0o644))
	var cliTotal, jobTotal time.Duration
	for b.Loop() {
		dsn, _ := benchDB(b)
		start := time.Now()
		out, err := exec.Command(bin, "--database-url", dsn, "import", "--corpus", "c", "--service", "echo", "--from-list", list).CombinedOutput()
		require.NoError(b, err, "%s", out)
		cliTotal += time.Since(start)
		jobTotal += importJobViaAPI(b, bin, list)
	}
	cli, job := cliTotal.Seconds()/float64(b.N), jobTotal.Seconds()/float64(b.N)
	b.ReportMetric(cli, "cli_s")
	b.ReportMetric(job, "job_s")
	b.ReportMetric(job/cli, "job/cli")
	b.ReportMetric(float64(n), "entries")
}

// importJobViaAPI runs one import of list as a job through the API and returns its time.
func importJobViaAPI(b *testing.B, bin, list string) time.Duration {
	b.Helper()
	dsn, pool := benchDB(b)
	root := base.New(pool, nil, nil)
	const tok = "bench-admin-token-0123456789abcdef"
	srv, err := web.New(web.Config{Base: root, Store: root.Lease(lease.Config{}), AdminToken: tok, Jobs: jobops.Registry("bench")})
	require.NoError(b, err)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	runner := exec.Command(bin, "--database-url", dsn, "jobs", "work", "--job-workers", "1", "--job-beat", "1s")
	runner.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(b, runner.Start())
	defer func() {
		_ = runner.Process.Signal(os.Interrupt)
		_ = runner.Wait()
	}()
	time.Sleep(time.Second) // the runner connected and polling, as a replica's runner is
	body, err := json.Marshal(map[string]any{"kind": "import", "args": jobops.ImportArgs{Corpus: "c", Service: "echo", FromList: list}})
	require.NoError(b, err)
	start := time.Now()
	req, err := http.NewRequest("POST", hs.URL+"/api/v1/jobs", bytes.NewReader(body))
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
		require.Less(b, i, 360000, "the job did not finish")
		resp, err := http.Get(hs.URL + acc.Href)
		require.NoError(b, err)
		var j struct {
			State, Error string
		}
		require.NoError(b, json.NewDecoder(resp.Body).Decode(&j))
		require.NoError(b, resp.Body.Close())
		if j.State == "completed" {
			return time.Since(start)
		}
		require.NotContains(b, []string{"failed", "cancelled"}, j.State, j.Error)
		time.Sleep(10 * time.Millisecond)
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
