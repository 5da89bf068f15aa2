// Package queuetest gives tests a real PostgreSQL: a fresh migrated database per test, copied
// from a template on one ephemeral cluster per test process.
//
// The cluster starts on first use: initdb and pg_ctl from $CORTEXQ_PG_BIN, the newest
// /usr/lib/postgresql/*/bin, or pg_config --bindir / PATH, listening on a unix socket in a temp
// dir, with fsync off. When the process runs as root, postgres runs as the postgres user in a
// temp dir that user owns. Set CORTEXQ_TEST_DATABASE_URL to use an existing server instead (its
// role must be allowed to CREATE DATABASE). No PostgreSQL at all fails the test; it never skips.
//
// Call Main from each package's TestMain so the cluster stops when the tests end:
//
//	func TestMain(m *testing.M) { queuetest.Main(m) }
//
// Without it, or when the process is killed, a watchdog shell started with the cluster notices
// the process is gone, stops the cluster and removes its directory.
package queuetest

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

// dbSeq numbers the databases this process creates: t_<pid>_<n>.
var dbSeq atomic.Int64

var shared struct {
	once    sync.Once
	cluster *Cluster
	err     error
}

// Shared returns the server every NewDB of this process uses, starting it on first use.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() {
		if url := os.Getenv("CORTEXQ_TEST_DATABASE_URL"); url != "" {
			shared.cluster = &Cluster{base: url}
			return
		}
		shared.cluster, shared.err = startLocal(t, 0)
	})
	if shared.err != nil {
		t.Fatalf("queuetest: %v", shared.err)
	}
	return shared.cluster
}

// NewDB creates a fresh migrated database, dropped in t.Cleanup, and returns its connection string.
func NewDB(t testing.TB) string {
	t.Helper()
	return Shared(t).NewDB(t)
}

// ConnString is NewDB: the connection string of a fresh migrated database, for code that takes a
// DSN (a CLI flag, a subprocess) rather than a pool.
func ConnString(t testing.TB) string {
	t.Helper()
	return Shared(t).NewDB(t)
}

// NewPool returns a pool on a fresh migrated database; the pool is closed and the database dropped
// in t.Cleanup.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return Shared(t).NewPool(t)
}

// toxicRun is the function of toxiproxy's that runs a toxic.
const toxicRun = "github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"

// Main runs the tests, stops the shared cluster and removes its directory, and exits with the
// tests' code. Call it from TestMain.
//
// After passing tests it checks that no goroutine is left running (goleak: every goroutine a
// test started must be joined when the test ends), then runs each of checks; an error fails the
// run.
func Main(m *testing.M, checks ...func() error) {
	code := m.Run()
	// toxiproxy, the fault tests' proxy (docs/operations.md#networks), leaves a toxic's
	// goroutine blocked behind a link it stopped: its own, not a test's.
	leaks := func() error { return goleak.Find(goleak.IgnoreAnyFunction(toxicRun)) }
	for _, check := range append([]func() error{leaks}, checks...) {
		if code != 0 {
			break
		}
		if err := check(); err != nil {
			fmt.Fprintf(os.Stderr, "queuetest: after the tests: %v\n", err)
			code = 1
		}
	}
	if shared.cluster != nil {
		if err := shared.cluster.close(); err != nil {
			fmt.Fprintf(os.Stderr, "queuetest: %v\n", err)
		}
	}
	os.Exit(code)
}
