package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/leasetest"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// The cortexq binary, built once per test process by go build.
var built struct {
	once sync.Once
	path string
	err  error
}

func binary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		// go test runs this binary from a work directory it removes afterwards: build beside it,
		// so nothing is left behind. Run some other way, fall back to a temp dir.
		dir := filepath.Dir(os.Args[0])
		if !strings.Contains(dir, "go-build") {
			if dir, built.err = os.MkdirTemp("", "cortexq-cli-test-"); built.err != nil {
				return
			}
		}
		built.path = filepath.Join(dir, "cortexq")
		// The test knobs (serve --clock-skew) exist only in this build, never in the production binary.
		out, err := exec.Command("go", "build", "-tags", "cortexq_testknobs", "-o", built.path, ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	require.NoError(t, built.err)
	return built.path
}

// result is what one run of the binary did.
type result struct {
	stdout, stderr string
	code           int
}

// cortexq runs the binary with args; env adds to (and overrides) an environment cleared of
// every database setting.
func cortexq(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORTEXQ_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run cortexq %v: %v", args, err)
	}
	return r
}

// ok runs the binary and requires it to succeed, returning its stdout.
func (d *testDB) ok(args ...string) string {
	d.t.Helper()
	r := cortexq(d.t, d.env, args...)
	require.Equal(d.t, 0, r.code, "cortexq %v failed:\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
	return r.stdout
}

// testDB is a fresh migrated database, the environment that points the binary at it, and a
// lease store on it.
type testDB struct {
	t     *testing.T
	ctx   context.Context
	dsn   string
	env   []string
	pool  *pgxpool.Pool
	root  *base.Base
	store *lease.Store
}

func newTestDB(t *testing.T) *testDB {
	t.Helper()
	t.Parallel()
	return newTestDBOn(t, queuetest.ConnString(t))
}

// newTestDBOn is newTestDB on the database of dsn.
func newTestDBOn(t *testing.T, dsn string) *testDB {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d := &testDB{t: t, ctx: ctx, dsn: dsn, env: []string{"DATABASE_URL=" + dsn}, pool: pool,
		root: base.New(pool, nil, nil)}
	d.store = d.root.Lease(lease.Config{Replica: "r1", LeaseTimeout: time.Hour})
	return d
}

// count runs a query returning one number.
func (d *testDB) count(query string, args ...any) int {
	d.t.Helper()
	var n int
	require.NoError(d.t, d.pool.QueryRow(d.ctx, query, args...).Scan(&n), query)
	return n
}

// importList imports the entries through --from-list, returning the command's output.
func (d *testDB) importList(corpus, service string, entries ...string) string {
	d.t.Helper()
	list := filepath.Join(d.t.TempDir(), "list")
	require.NoError(d.t, os.WriteFile(list, []byte(strings.Join(entries, "\n")+"\n"), 0o644))
	return d.ok("import", "--corpus", corpus, "--service", service, "--from-list", list)
}

// entries names n source archives.
func entries(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("/corpus/%s%d/%s%d.zip", prefix, i, prefix, i)
	}
	return out
}

func (d *testDB) scope(corpus, service string) queue.Scope {
	d.t.Helper()
	s, err := d.root.Catalog.LookupScope(d.ctx, corpus, service)
	require.NoError(d.t, err)
	return s
}

func (d *testDB) lease(service int32, workers ...string) []lease.Lease {
	d.t.Helper()
	leases, err := leasetest.Lease(d.ctx, d.store, leasetest.Request{ServiceID: service, Workers: workers})
	require.NoError(d.t, err)
	require.NoError(d.t, d.store.FlushWorkers(d.ctx)) // as a replica does each second
	require.Len(d.t, leases, len(workers))
	return leases
}

func (d *testDB) claim(r lease.Result) lease.Decision {
	d.t.Helper()
	ds, err := leasetest.Claim(d.ctx, d.store, []lease.Result{r}, nil)
	require.NoError(d.t, err)
	require.NoError(d.t, d.store.FlushWorkers(d.ctx)) // as a replica does each second
	require.Len(d.t, ds, 1)
	return ds[0]
}

// oneLine requires a failed run that said one line on stderr containing want, and nothing on
// stdout.
func oneLineFailure(t *testing.T, r result, want string) {
	t.Helper()
	require.NotEqual(t, 0, r.code, "exit code")
	require.Empty(t, r.stdout, "stdout")
	require.True(t, strings.HasSuffix(r.stderr, "\n"), "stderr ends its line: %q", r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line on stderr: %q", r.stderr)
	require.Contains(t, r.stderr, want)
	require.NotContains(t, r.stderr, "goroutine", "no stack trace")
}
