package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/queuetest"
)

// waitReplayed waits until standby has replayed everything primary had written when called.
func waitReplayed(t *testing.T, primary, standby *queuetest.Cluster) {
	t.Helper()
	ctx := context.Background()
	var lsn string
	require.NoError(t, queryOne(ctx, primary.AdminDSN(), "SELECT pg_current_wal_lsn()::text", &lsn))
	waitFor(t, 60*time.Second, "the standby replays "+lsn, func() bool {
		var done bool
		return queryOne(ctx, standby.AdminDSN(), "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", &done, lsn) == nil && done
	})
}

// queryOne runs a query of one value on a connection of its own.
func queryOne(ctx context.Context, dsn, query string, dest any, args ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, query, args...).Scan(dest)
}

// TestAuditsOnAHotStandby: a primary with a streaming hot standby; the work is done on the
// primary (a bench, then a rerun and a second bench run of it, so two runs to compare), and
// every reading command runs against the standby: status, report (each level), runs, diff,
// task show, the audit views, and web --read-only's pages. Nothing tries to write (a standby
// refuses every write: any attempt would fail the command), and the pages that read the
// report rollups say how fresh they are, as of the standby's replay.
func TestAuditsOnAHotStandby(t *testing.T) {
	t.Parallel()
	primary := queuetest.NewCluster(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, primary.AdminDSN())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE audited")
	require.NoError(t, err)
	conn.Close(ctx)
	standby := queuetest.NewStandby(t, primary, "standby1")
	p := &testDB{t: t, env: []string{"DATABASE_URL=" + primary.DSN("audited")}}
	p.ok("migrate", "up")
	out := p.ok("bench", "--tasks", "40", "--workers", "2", "--payload-kb", "1", "--messages", "20", "--dir", t.TempDir())
	require.Contains(t, out, "→ ok")
	corpus := regexp.MustCompile(`bench-[0-9.-]+`).FindString(p.ok("status"))
	require.NotEmpty(t, corpus)
	p.ok("rerun", "--yes", "--corpus", corpus, "--service", "bench_echo", "--severity", "error") // a second run, for the diff
	p.ok("fold")
	waitReplayed(t, primary, standby)

	s := &testDB{t: t, env: []string{"DATABASE_URL=" + standby.DSN("audited")}}
	var inRecovery bool
	require.NoError(t, queryOne(ctx, standby.DSN("audited"), "SELECT pg_is_in_recovery()", &inRecovery))
	require.True(t, inRecovery, "a standby")
	scope := []string{"--corpus", corpus, "--service", "bench_echo"}
	require.Contains(t, s.ok("status"), corpus)
	require.Contains(t, s.ok(append([]string{"report"}, scope...)...), "TASKS")
	cat := s.ok(append([]string{"report", "--severity", "warning"}, scope...)...)
	require.Regexp(t, `counts as of the fold .*; a standby: its last replayed commit is \d+s old`, cat)
	require.Contains(t, s.ok(append([]string{"runs"}, scope...)...), "current")
	require.Contains(t, s.ok(append([]string{"diff"}, scope...)...), "no_problem")
	require.Contains(t, s.ok("task", "show", "1"), "attempts (")
	var views []string
	require.NoError(t, queryOne(ctx, standby.DSN("audited"), `SELECT array_agg(table_name::text) FROM information_schema.views WHERE table_name LIKE 'audit\_%'`, &views))
	require.GreaterOrEqual(t, len(views), 8, views)
	for _, view := range views {
		var n int
		require.NoError(t, queryOne(ctx, standby.DSN("audited"), "SELECT count(*) FROM "+pgx.Identifier{view}.Sanitize(), &n), view)
	}

	web, base := s.startWeb("--read-only")
	q := "?corpus=" + corpus + "&service=bench_echo"
	for _, path := range []string{"/", "/live", "/report" + q, "/report" + q + "&severity=warning", "/runs" + q, "/task/1", "/workers"} {
		code, body := get(t, base+path)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		if strings.Contains(path, "severity=warning") {
			require.Regexp(t, `Counts as of the fold .* On a standby: its last replayed commit is \d+s old\.`, body, path)
		}
	}
	// The API: its reads on the standby, its actions refused with a JSON error, by --read-only
	// and, on a dashboard with a token, by the standby itself.
	api := "/api/v1/corpora/" + corpus + "/services/bench_echo"
	for _, path := range []string{"/api/v1/status", api + "/report", api + "/report/categories?severity=warning", api + "/runs", "/api/v1/tasks/1"} {
		code, body := get(t, base+path)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
	}
	code, body := apiPost(t, base+api+"/pause", docsToken)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, `"code":"read_only"`)
	require.Equal(t, 0, web.stop(syscall.SIGTERM, 10*time.Second))
	require.NotContains(t, web.log(), "read-only transaction", web.log())
	tokened, tbase := s.startWeb("--admin-token", docsToken)
	code, body = apiPost(t, tbase+api+"/pause", docsToken)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, `"code":"read_only"`)
	require.Contains(t, body, "hot standby")
	require.Equal(t, 0, tokened.stop(syscall.SIGTERM, 10*time.Second))
}

// apiPost POSTs to an API action with a bearer token, returning the status and body.
func apiPost(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
