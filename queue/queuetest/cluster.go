package queuetest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/migrations"
	"github.com/cortexq/cortexq/queue/pgembed"
)

// errNoPostgres is reported, through t.Fatal, when no PostgreSQL server binaries can be found.
var errNoPostgres = errors.New("PostgreSQL server binaries not found: run scripts/test (it installs them) " +
	"or apt-get install postgresql, or set CORTEXQ_TEST_DATABASE_URL")

// settings are the test clusters' postgresql.conf lines beyond the embedded cluster's (which
// runs them throwaway: no durability).
var settings = []string{"max_connections = 300", "shared_buffers = 128MB"}

// templateName is the migrated database every test database is copied from.
const templateName = "cortexq_template"

// templateLockKey is the advisory lock that serializes template work across test processes that
// share one server (CORTEXQ_TEST_DATABASE_URL).
const templateLockKey = 0x636f727465787100 // "cortexq\x00"

// Cluster is a PostgreSQL server for tests: an ephemeral cluster started by this process, or the
// external server named by CORTEXQ_TEST_DATABASE_URL.
type Cluster struct {
	base string // connection string of the server; DSN swaps in the database

	// Local clusters only: the embedded cluster, with test settings.
	pg       *pgembed.Cluster
	watchdog *exec.Cmd // stops the cluster if this process dies
	lifeline *os.File  // write end of the watchdog's stdin; EOF means "we are gone"

	tmplOnce sync.Once
	tmplErr  error

	mu      sync.Mutex // serializes CREATE/DROP DATABASE; guards running
	running bool

	port int // NewTCPCluster's TCP port on 127.0.0.1
}

// Port is a NewTCPCluster's TCP port on 127.0.0.1 (zero for other clusters).
func (c *Cluster) Port() int { return c.port }

// NewCluster starts a private PostgreSQL cluster for t, stopped and deleted in t.Cleanup. Use it
// for tests that stop or restart the server; everything else should share the process's cluster
// through NewDB. It always starts a local cluster, even when CORTEXQ_TEST_DATABASE_URL is set.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	return newCluster(t, 0)
}

// NewTCPCluster is NewCluster, its server also listening on 127.0.0.1:port (trusting every
// local connection, as the test clusters do), for tests that put a fault-injecting proxy between
// it and its clients: TCPDSN names a database through such a proxy.
func NewTCPCluster(t testing.TB, port int) *Cluster {
	t.Helper()
	return newCluster(t, port)
}

// TCPDSN returns the connection string of database db through the TCP address addr
// (host:port), such as a proxy in front of a NewTCPCluster's port.
func TCPDSN(addr, db string) string {
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Host: addr, Path: "/" + db,
		RawQuery: "sslmode=disable"}).String()
}

// DBName returns the database a connection string of NewDB names.
func DBName(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	return cfg.Database
}

func newCluster(t testing.TB, port int) *Cluster {
	t.Helper()
	c, err := startLocal(t, port)
	if err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.close(); err != nil {
			t.Errorf("queuetest: %v", err)
		}
	})
	return c
}

// DSN returns the connection string for database db on the cluster.
func (c *Cluster) DSN(db string) string {
	if u, err := url.Parse(c.base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		u.RawPath = ""
		return u.String()
	}
	// Keyword/value form: a later keyword wins.
	return c.base + " dbname='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(db) + "'"
}

// AdminDSN returns the connection string for the cluster's maintenance database.
func (c *Cluster) AdminDSN() string {
	if c.local() {
		return c.DSN("postgres")
	}
	return c.base
}

// NewDB creates a fresh migrated database on the cluster, dropped in t.Cleanup, and returns its
// connection string.
func (c *Cluster) NewDB(t testing.TB) string {
	t.Helper()
	c.tmplOnce.Do(func() { c.tmplErr = c.createTemplate() })
	if c.tmplErr != nil {
		t.Fatalf("queuetest: %v", c.tmplErr)
	}
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), dbSeq.Add(1))
	ident := pgx.Identifier{name}.Sanitize()
	err := c.admin(func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE "+pgx.Identifier{templateName}.Sanitize())
		return err
	})
	if err != nil {
		t.Fatalf("queuetest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if c.local() && !c.isRunning() {
			return // a stopped private cluster: its directory goes away whole
		}
		err := c.admin(func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
			return err
		})
		if err != nil {
			t.Errorf("queuetest: drop database %s: %v", name, err)
		}
	})
	return c.DSN(name)
}

// NewBlankDB creates a fresh empty database on the cluster (no migrations: another
// application's, say), dropped in t.Cleanup, and returns its connection string.
func (c *Cluster) NewBlankDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("b_%d_%d", os.Getpid(), dbSeq.Add(1))
	ident := pgx.Identifier{name}.Sanitize()
	if err := c.admin(func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE template0")
		return err
	}); err != nil {
		t.Fatalf("queuetest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if c.local() && !c.isRunning() {
			return
		}
		if err := c.admin(func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
			return err
		}); err != nil {
			t.Errorf("queuetest: drop database %s: %v", name, err)
		}
	})
	return c.DSN(name)
}

// NewPool returns a pool on a fresh migrated database of the cluster; the pool is closed and the
// database dropped in t.Cleanup.
func (c *Cluster) NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := c.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("queuetest: open pool: %v", err)
	}
	t.Cleanup(pool.Close) // registered after the drop, so it runs before it
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("queuetest: ping: %v", err)
	}
	return pool
}

// Stop stops a local cluster (fast shutdown): clients are disconnected and new connections
// fail until Start.
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	c.mustLocal(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.pg.Stop(context.Background()); err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	c.running = false
}

// Start starts a local cluster stopped by Stop.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	c.mustLocal(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.pg.Start(context.Background()); err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	c.running = true
}

// Restart restarts a local cluster (fast shutdown, then a start), dropping every connection.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	c.mustLocal(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.pg.Stop(context.Background()); err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	if _, err := c.pg.Start(context.Background()); err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	c.running = true
}

func (c *Cluster) local() bool { return c.pg != nil }

func (c *Cluster) mustLocal(t testing.TB) {
	t.Helper()
	if !c.local() {
		t.Fatalf("queuetest: cannot stop or start the external server %s; use NewCluster", c.base)
	}
}

func (c *Cluster) isRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// admin runs fn on a new connection to the maintenance database while holding c.mu and the
// cross-process template lock: the template cannot be copied while it is being copied or built.
func (c *Cluster) admin(fn func(context.Context, *pgx.Conn) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.AdminDSN())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background()) // closing ends the session and its lock
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(templateLockKey)); err != nil {
		return fmt.Errorf("template lock: %w", err)
	}
	return fn(ctx, conn)
}

// createTemplate (re)builds the migrated template database. It is rebuilt once per process, so an
// external server never serves a template from older migrations.
func (c *Cluster) createTemplate() error {
	return c.admin(func(ctx context.Context, conn *pgx.Conn) error {
		ident := pgx.Identifier{templateName}.Sanitize()
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop template: %w", err)
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
			return fmt.Errorf("create template: %w", err)
		}
		if err := migrations.Up(ctx, c.DSN(templateName)); err != nil {
			return fmt.Errorf("migrate template: %w", err)
		}
		return nil
	})
}

// startLocal creates and starts an ephemeral cluster in a new directory in /tmp (short enough
// for a unix socket's path, and reachable by the postgres user when we are root).
func startLocal(t testing.TB, port int) (*Cluster, error) {
	t.Helper()
	return startLocalOn(t, port, "", nil)
}

// startLocalWith is startLocal with further settings; a standby of the cluster at primaryDSN
// (pg_basebackup, its conninfo taking the further conninfo words) when that is not empty.
func startLocalWith(t testing.TB, primaryDSN string, extra []string, conninfo ...string) (*Cluster, error) {
	t.Helper()
	return startLocalOn(t, 0, primaryDSN, extra, conninfo...)
}

// startLocalOn is startLocalWith, also listening on 127.0.0.1:port unless port is zero.
func startLocalOn(t testing.TB, port int, primaryDSN string, extra []string, conninfo ...string) (*Cluster, error) {
	t.Helper()
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("/tmp", "cortexq-pg-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	// The server's user owns the directory, so that the watchdog, which runs as that user, can
	// remove it.
	cred, err := pgembed.ServerCredential()
	if err == nil && cred != nil {
		err = os.Chown(dir, int(cred.Uid), int(cred.Gid))
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	if primaryDSN != "" {
		if err := baseBackup(bin, dir, primaryDSN, strings.Join(conninfo, "&")); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	conf := pgembed.Config{Dir: dir, BinDir: bin, Database: "postgres", Throwaway: true,
		Settings: append(append([]string{}, settings...), extra...)}
	if port != 0 {
		conf.Port = port
		conf.Settings = append(conf.Settings, "listen_addresses = '127.0.0.1'")
	}
	pg, err := pgembed.New(conf)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{pg: pg, port: port}
	if err := c.startWatchdog(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := pg.Start(ctx); err != nil {
		_ = c.close() // the start error is the one to report
		return nil, err
	}
	c.running = true
	c.base = pg.DSN()
	t.Logf("queuetest: started PostgreSQL (%s) in %s", bin, dir)
	return c, nil
}

// startWatchdog starts a shell, in its own session, that blocks reading a pipe only this process
// holds open. When this process exits for any reason (m.Run returning, a test timeout's panic,
// kill -9), the pipe closes and the shell stops the cluster and removes its directory.
func (c *Cluster) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watchdog pipe: %w", err)
	}
	defer r.Close()
	// The shell runs as the server's user (pg_ctl refuses root), which owns the cluster's
	// directory; the data directory is data/ in it (pgembed's layout).
	const script = `read _ ; "$0" stop -D "$1/data" -m immediate >/dev/null 2>&1 ; rm -rf "$1"`
	cmd := exec.Command("/bin/sh", "-c", script, filepath.Join(c.pg.BinDir(), "pg_ctl"), c.pg.Dir())
	cmd.Dir = "/"
	cmd.Stdin = r
	cred, err := pgembed.ServerCredential()
	if err != nil {
		r.Close()
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start watchdog: %w", err)
	}
	c.watchdog, c.lifeline = cmd, w
	return nil
}

// close stops a local cluster at once and removes its directory.
func (c *Cluster) close() error {
	if !c.local() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	if c.running {
		if _, err := c.pg.Stop(context.Background()); err != nil {
			errs = append(errs, err)
		}
		c.running = false
	}
	if err := os.RemoveAll(c.pg.Dir()); err != nil {
		errs = append(errs, fmt.Errorf("remove cluster dir: %w", err))
	}
	if c.lifeline != nil {
		c.lifeline.Close()
		_ = c.watchdog.Wait() // its work is already done
		c.lifeline = nil
	}
	return errors.Join(errs...)
}

// findBin returns the directory holding initdb and pg_ctl: $CORTEXQ_PG_BIN, else where the
// embedded cluster finds them (pgembed.FindBin).
func findBin() (string, error) {
	if dir := os.Getenv("CORTEXQ_PG_BIN"); dir != "" {
		if !pgembed.HasBinaries(dir) {
			return "", fmt.Errorf("CORTEXQ_PG_BIN=%s holds no initdb, pg_ctl and postgres: %w", dir, errNoPostgres)
		}
		return dir, nil
	}
	if dir, err := pgembed.FindBin(); err == nil {
		return dir, nil
	}
	return "", errNoPostgres
}
