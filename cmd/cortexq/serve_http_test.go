package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// countingCollector counts its collections.
type countingCollector struct{ n atomic.Int64 }

var descCounted = prometheus.NewDesc("test_collections", "Collections so far.", nil, nil)

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descCounted }

func (c *countingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descCounted, prometheus.GaugeValue, float64(c.n.Add(1)))
}

func TestServeHTTP(t *testing.T) {
	t.Run("ScrapesWithinASecondShareOneCollection", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		counted := &countingCollector{}
		reg.MustRegister(counted)
		h := metricsHandler(reg)
		start := time.Now()
		for range 50 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			require.Equal(t, http.StatusOK, rec.Code)
			require.Contains(t, rec.Body.String(), "test_collections")
		}
		if time.Since(start) < metricsMaxAge {
			require.EqualValues(t, 1, counted.n.Load(), "one collection for 50 scrapes")
		}
		time.Sleep(metricsMaxAge)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		require.Contains(t, rec.Body.String(), "test_collections "+fmt.Sprint(counted.n.Load()), "then collected afresh")
	})

	t.Run("HealthzSaysDatabaseUnreachableAndLogsWhy", func(t *testing.T) {
		t.Parallel()
		// A database that cannot be reached: a socket directory that does not exist.
		dir := filepath.Join(t.TempDir(), "no-such-socket-dir")
		pool, err := pgxpool.New(context.Background(), "host="+dir+" user=secret_user dbname=x connect_timeout=1")
		require.NoError(t, err)
		defer pool.Close()
		var logs bytes.Buffer
		h := healthzHandler(pool, slog.New(slog.NewTextHandler(&logs, nil)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		require.Equal(t, "database unreachable\n", rec.Body.String())
		require.Contains(t, logs.String(), dir, "the detail is logged")
		require.Contains(t, logs.String(), "secret_user")
	})

	t.Run("DefaultsToLoopback", func(t *testing.T) {
		t.Parallel()
		for _, f := range serveCommand().Flags {
			if f.Names()[0] == "http" {
				require.Equal(t, "127.0.0.1:9464", f.(*cli.StringFlag).Value)
				return
			}
		}
		t.Fatal("no --http flag")
	})
}

// TestServeWarnsOfHTTPBeyondLoopbackAndUpstreamUnfriendlyMessageSize runs a replica with
// --http on every interface and --message-size 50000: it serves, and says why both are unwise.
func TestServeWarnsOfHTTPBeyondLoopbackAndUpstreamUnfriendlyMessageSize(t *testing.T) {
	d := newTestDB(t)
	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	port := loopbackPort(t)
	replica := d.start("serve", "--replica", "r-http", "--ventilator", vent, "--sink", sink,
		"--http", fmt.Sprintf("0.0.0.0:%d", port), "--message-size", "50000")
	waitFor(t, 30*time.Second, "the replica serves", func() bool { return strings.Contains(replica.log(), "serving workers") })
	log := replica.log()
	require.Contains(t, log, "served beyond loopback")
	require.Contains(t, log, "upstream CorTeX workers end a payload")
	code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second))

	help := cortexq(t, nil, "serve", "--help")
	require.Contains(t, help.stdout, "keep 100000 with upstream CorTeX workers")
}

// TestServeRefusesASecretKeyFileOthersCanRead checks the key file's mode, as ssh does.
func TestServeRefusesASecretKeyFileOthersCanRead(t *testing.T) {
	d := newTestDB(t)
	path := writeKeyPair(t, d, t.TempDir(), "replica.key")
	serve := func() result {
		return cortexq(t, d.env, "serve", "--replica", "r-key", "--http", "",
			"--ventilator", fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t)),
			"--sink", fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t)),
			"--curve-secret-key-file", path, "--drain-timeout", "0s")
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		require.NoError(t, os.Chmod(path, mode))
		r := serve()
		oneLineFailure(t, r, fmt.Sprintf("--curve-secret-key-file %s: permissions %04o are too open", path, mode))
		require.Contains(t, r.stderr, "chmod 600")
	}
	worker := cortexq(t, d.env, "worker", "echo", "--service", "echo", "--server-key", path, "--key-file", path)
	oneLineFailure(t, worker, "--key-file "+path+": permissions 0604 are too open")
}
