package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWebReadOnlyOnAnAuditRole runs cortexq web --read-only on the connection of an audit role
// made by cortexq db grant-audit: every page reads, nothing acts, whatever the token.
func TestWebReadOnlyOnAnAuditRole(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 3)...)
	d.ok("rerun", "--yes", "--corpus", "c", "--service", "echo") // a closed run, for the diff
	var run int64
	require.NoError(t, d.pool.QueryRow(d.ctx, `SELECT min(id) FROM runs`).Scan(&run))
	role := testRole(t, d, "webaudit")
	d.ok("db", "grant-audit", role, "--password", "s3cret")
	addr := fmt.Sprintf("127.0.0.1:%d", loopbackPort(t))
	ro := *d
	ro.env = []string{"DATABASE_URL=" + asRole(t, d.dsn, role, "s3cret"), "CORTEXQ_ADMIN_TOKEN=a-token-long-enough-1234"}
	p := ro.start("web", "--read-only", "--listen", addr)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the dashboard answers: %s", p.log())
	for _, path := range []string{"/", "/live", "/report?corpus=c&service=echo", "/report?corpus=c&service=echo&severity=fatal",
		"/task/1", "/runs?corpus=c&service=echo", "/workers",
		fmt.Sprintf("/runs?corpus=c&service=echo&from=%d&to=current", run),
		fmt.Sprintf("/runs/cell?corpus=c&service=echo&from=%d&to=current&fs=0&ts=0", run)} {
		code, body := get(t, base+path)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
	}
	_, body := get(t, base+"/")
	require.Contains(t, body, "read-only")
	require.NotContains(t, body, `href="/login"`)
	for _, path := range []string{"/login", "/rerun", "/pause"} {
		resp, err := http.PostForm(base+path, url.Values{"token": {"a-token-long-enough-1234"}, "corpus": {"c"}, "service": {"echo"}})
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
	}
	require.Equal(t, 0, p.stop(syscall.SIGTERM, 10*time.Second), "web exits cleanly on SIGTERM")
	require.True(t, strings.Contains(p.log(), "read-only (--read-only)"), p.log())
}

// TestWebRefusesAShortToken refuses an admin token shorter than 16 characters.
func TestWebRefusesAShortToken(t *testing.T) {
	d := newTestDB(t)
	r := cortexq(t, append(d.env, "CORTEXQ_ADMIN_TOKEN=short"), "web")
	oneLineFailure(t, r, "--admin-token: want at least 16 characters")
	require.Equal(t, 2, r.code)
}
