// Package pgembed runs cortexq's embedded PostgreSQL: a cluster of its own in one directory
// (cortexq's $CORTEXQ_HOME), made with the local PostgreSQL binaries on first use and started on
// demand. It listens on a unix socket only, in a directory only its owner can enter, and keeps
// PostgreSQL's durable settings (fsync, synchronous_commit and full_page_writes on).
//
// PostgreSQL refuses to run as root. When the caller is root the cluster runs as the postgres
// user: its data directory is owned by that user, and every directory on the way to it is made
// traversable (o+x, which lets others pass through, not list); each change is logged.
//
// Layout of the directory:
//
//	data/          the cluster (PGDATA)
//	run/           the unix socket (when the path is too long for one: a private directory of a
//	               random name in /tmp, recorded in socket_dir)
//	postgres.log   the server's log
//	lock           serializes Start and Stop across processes
package pgembed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// Config configures a Cluster.
type Config struct {
	// Dir holds the cluster; it is created if missing. Relative paths are made absolute.
	Dir string
	// BinDir holds initdb, pg_ctl and postgres. Empty: the newest /usr/lib/postgresql/*/bin,
	// then pg_config --bindir, then PATH.
	BinDir string
	// Database is the database Start makes sure of (DatabaseDefault when empty).
	Database string
	// SetupFunc, if set, prepares the database when Start creates it (cortexq's migrations). It
	// runs on a database of another name that takes Database's name only once SetupFunc
	// succeeds, so a failed setup is tried again by the next Start.
	SetupFunc func(ctx context.Context, dsn string) error
	// Logger receives what the cluster does; nil discards it.
	Logger *slog.Logger
	// Throwaway gives up durability for speed, for clusters that are deleted after use (the
	// tests' clusters): initdb without fsync, and fsync, synchronous_commit and
	// full_page_writes off.
	Throwaway bool
	// Settings are further postgresql.conf lines ("max_connections = 300"), written after
	// cortexq's own at each start, so that they win.
	Settings []string
	// Port, when set, is the server's port (its unix socket's name, and its TCP port where
	// Settings open one), and the DSN's; zero: PostgreSQL's 5432.
	Port int
}

// DatabaseDefault is the database of a Config without one.
const DatabaseDefault = "cortexq"

// role is the superuser initdb creates, and the user of the DSN.
const role = "postgres"

// maxSocketPath bounds the unix socket's path (.s.PGSQL.5432 included): the kernel allows 107
// bytes.
const maxSocketPath = 100

// startTimeout bounds pg_ctl start and stop: recovery after a crash can take a while.
const startTimeout = 300 * time.Second

// Cluster is the embedded cluster in one directory.
type Cluster struct {
	cfg    Config
	dir    string
	bin    string
	sock   string
	cred   *syscall.Credential // set when root: the cluster runs as the postgres user
	logger *slog.Logger
}

// New returns the cluster in cfg.Dir. It finds the binaries and, when root, the postgres user;
// it changes nothing on disk.
func New(cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded postgres: no directory")
	}
	if cfg.Database == "" {
		cfg.Database = DatabaseDefault
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	bin := cfg.BinDir
	if bin == "" {
		if bin, err = FindBin(); err != nil {
			return nil, err
		}
	} else if !HasBinaries(bin) {
		return nil, fmt.Errorf("embedded postgres: %s holds no initdb, pg_ctl and postgres", bin)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{cfg: cfg, dir: dir, bin: bin, logger: logger.With("component", "pgembed")}
	if c.cred, err = ServerCredential(); err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	c.sock = c.runDir()
	if c.longPath() {
		// The directory made by the last start, if any (checked again at the next start).
		if b, err := os.ReadFile(c.socketRecord()); err == nil {
			c.sock = strings.TrimSpace(string(b))
		}
	}
	return c, nil
}

func (c *Cluster) runDir() string       { return filepath.Join(c.dir, "run") }
func (c *Cluster) socketRecord() string { return filepath.Join(c.dir, "socket_dir") }

// longPath reports whether <dir>/run is too long a path for the cluster's unix socket.
func (c *Cluster) longPath() bool { return len(c.runDir())+len("/.s.PGSQL.5432") > maxSocketPath }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

// BinDir is the directory of the PostgreSQL binaries the cluster runs.
func (c *Cluster) BinDir() string { return c.bin }

// DSN is the connection string of the cluster's database.
func (c *Cluster) DSN() string { return c.dsn(c.cfg.Database) }

func (c *Cluster) dsn(db string) string {
	q := "host=" + url.QueryEscape(c.sock) + "&sslmode=disable"
	if c.cfg.Port != 0 {
		q += "&port=" + strconv.Itoa(c.cfg.Port)
	}
	return (&url.URL{Scheme: "postgres", User: url.User(role), Path: "/" + db, RawQuery: q}).String()
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }
func (c *Cluster) logFile() string { return filepath.Join(c.dir, "postgres.log") }

// Initialized reports whether the cluster's data directory has been made.
func (c *Cluster) Initialized() bool {
	_, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION"))
	return err == nil
}

// Running reports whether the cluster's server is running.
func (c *Cluster) Running(ctx context.Context) (bool, error) {
	if !c.Initialized() {
		return false, nil
	}
	_, err := c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "status", "-D", c.dataDir())
	if err == nil {
		return true, nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		return false, nil
	}
	return false, err
}

// Start makes the cluster ready: created on first use, started if it is not running, and its
// database created (and set up) if missing. It reports whether it started the server.
func (c *Cluster) Start(ctx context.Context) (started bool, err error) {
	unlock, err := c.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	if !c.Initialized() {
		if err := c.initdb(ctx); err != nil {
			return false, err
		}
	}
	running, err := c.Running(ctx)
	if err != nil {
		return false, err
	}
	if !running {
		if err := c.start(ctx); err != nil {
			return false, err
		}
		started = true
	}
	return started, c.ensureDatabase(ctx)
}

// Stop stops the server (fast shutdown: sessions are ended, committed work is kept). It reports
// whether the server was running.
func (c *Cluster) Stop(ctx context.Context) (bool, error) {
	unlock, err := c.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	running, err := c.Running(ctx)
	if err != nil || !running {
		return false, err
	}
	if _, err := c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "stop", "-D", c.dataDir(), "-m", "fast",
		"-w", "-t", strconv.Itoa(int(startTimeout/time.Second))); err != nil {
		return true, fmt.Errorf("stop embedded postgres: %w", err)
	}
	c.logger.Info("stopped PostgreSQL", "dir", c.dir)
	return true, nil
}

// lock takes the directory's lock file, creating the directory first.
func (c *Cluster) lock() (func(), error) {
	if err := c.prepareDir(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(c.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("embedded postgres: lock: %w", err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// prepareDir creates the directory and, when root, lets the postgres user through it.
func (c *Cluster) prepareDir() error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("embedded postgres: %w", err)
	}
	if c.cred == nil {
		return nil
	}
	for d := c.dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("embedded postgres: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("embedded postgres: make %s traversable for the postgres user: %w", d, err)
			}
			c.logger.Warn("running as root: made a directory traversable (o+x) so the postgres user can reach the cluster",
				"path", d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// mkdirOwned creates dir, or takes it as it is, and makes it the server user's, mode 0700.
func (c *Cluster) mkdirOwned(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return c.ownDir(dir)
}

// ownDir makes dir the server user's, mode 0700, through a descriptor opened without following
// a symbolic link: a link planted in dir's place is refused, and its target left alone.
func (c *Cluster) ownDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: not a directory of its own (a symbolic link?): %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if c.cred != nil {
		if err := unix.Fchown(fd, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

// writeOwned writes data to the file path (flag: O_TRUNC or O_APPEND), created 0600 if missing,
// and makes it the server user's; as ownDir, never through a symbolic link (the data directory
// is the server user's to plant one in).
func (c *Cluster) writeOwned(path string, flag int, data string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|flag, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if err == nil && c.cred != nil {
		err = f.Chown(int(c.cred.Uid), int(c.cred.Gid))
	}
	return errors.Join(err, f.Close())
}

// isOwnDir reports whether path is a directory (not a symbolic link) of the server user's, that
// only they may enter.
func (c *Cluster) isOwnDir(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return false
	}
	uid := uint32(os.Geteuid())
	if c.cred != nil {
		uid = c.cred.Uid
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uid
}

// makeSocketDir makes the directory of the unix socket: <dir>/run, or, when that path is too
// long, a private directory of a random name in /tmp (MkdirTemp: created anew, never one that
// another user made or linked first), recorded in <dir>/socket_dir and used again while it is
// still the server user's own.
func (c *Cluster) makeSocketDir() error {
	if !c.longPath() {
		return c.mkdirOwned(c.sock)
	}
	if c.sock != c.runDir() && c.isOwnDir(c.sock) {
		return nil
	}
	dir, err := os.MkdirTemp("/tmp", "cortexq-")
	if err != nil {
		return err
	}
	if err := c.ownDir(dir); err != nil {
		os.Remove(dir)
		return err
	}
	tmp := c.socketRecord() + ".tmp"
	err = os.WriteFile(tmp, []byte(dir+"\n"), 0o600)
	if err == nil {
		err = os.Rename(tmp, c.socketRecord())
	}
	if err != nil {
		os.Remove(dir)
		return err
	}
	c.sock = dir
	return nil
}

// initdb makes the data directory, removing it again if that fails.
func (c *Cluster) initdb(ctx context.Context) error {
	data := c.dataDir()
	if err := os.RemoveAll(data); err != nil { // the leftovers of a failed initdb
		return fmt.Errorf("embedded postgres: %w", err)
	}
	if err := c.mkdirOwned(data); err != nil {
		return fmt.Errorf("embedded postgres: data directory: %w", err)
	}
	// Unix socket only, reachable by the owner alone; trust is safe behind that.
	args := []string{"-D", data, "-U", role, "-A", "trust", "-E", "UTF8", "--locale=C"}
	if c.cfg.Throwaway {
		args = append(args, "--no-sync")
	}
	if _, err := c.run(ctx, filepath.Join(c.bin, "initdb"), args...); err != nil {
		os.RemoveAll(data)
		return fmt.Errorf("embedded postgres: %w", err)
	}
	conf, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = conf.WriteString("\n# cortexq: settings of the embedded cluster (socket directory in cortexq.conf)\n" +
			"include_if_exists = 'cortexq.conf'\n")
		err = errors.Join(err, conf.Close())
	}
	if err != nil {
		os.RemoveAll(data)
		return fmt.Errorf("embedded postgres: postgresql.conf: %w", err)
	}
	c.logger.Info("created a PostgreSQL cluster", "dir", data, "bin", c.bin, "as_postgres_user", c.cred != nil)
	return nil
}

// start writes the settings and starts the server, detached in a session of its own so that an
// interrupt of this process does not reach it.
func (c *Cluster) start(ctx context.Context) error {
	if err := c.makeSocketDir(); err != nil {
		return fmt.Errorf("embedded postgres: socket directory: %w", err)
	}
	if filepath.Dir(c.sock) != c.dir {
		c.logger.Info("the cluster's path is too long for a unix socket: the socket is elsewhere", "socket_dir", c.sock)
	}
	durable := "on"
	if c.cfg.Throwaway {
		durable = "off"
	}
	lines := []string{
		"# Written by cortexq at each start: do not edit.",
		"listen_addresses = ''",
		"unix_socket_directories = " + quoteConf(c.sock),
		"unix_socket_permissions = 0700",
		"fsync = " + durable,
		"synchronous_commit = " + durable,
		"full_page_writes = " + durable,
		// Room for a corpus's hot rows, and fewer checkpoints (each makes the next writes of
		// every page log the whole page): durability is unchanged.
		"shared_buffers = 512MB",
		"max_wal_size = 4GB",
		"checkpoint_timeout = 15min",
	}
	if c.cfg.Throwaway {
		// Without fsync and full-page writes a checkpoint costs little, and a crash (the fault
		// tests') replays only the WAL since the last one: 30 s of it, not up to 4 GB (29 s of
		// recovery measured after a 120,000-task run).
		lines = append(lines, "checkpoint_timeout = 30s")
	}
	if c.cfg.Port != 0 {
		lines = append(lines, "port = "+strconv.Itoa(c.cfg.Port))
	}
	settings := strings.Join(append(append(lines, c.cfg.Settings...), ""), "\n")
	if err := c.writeOwned(filepath.Join(c.dataDir(), "cortexq.conf"), os.O_TRUNC, settings); err != nil {
		return fmt.Errorf("embedded postgres: %w", err)
	}
	// pg_ctl opens the log as the server's user; the directory may not be writable by it.
	if err := c.writeOwned(c.logFile(), os.O_APPEND, ""); err != nil {
		return fmt.Errorf("embedded postgres: %w", err)
	}
	if _, err := c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "start", "-D", c.dataDir(), "-l", c.logFile(),
		"-w", "-t", strconv.Itoa(int(startTimeout/time.Second))); err != nil {
		log, _ := os.ReadFile(c.logFile())
		return fmt.Errorf("start embedded postgres (log %s): %w: %s", c.logFile(), err, lastLine(string(log)))
	}
	c.logger.Info("started PostgreSQL", "dir", c.dir, "socket_dir", c.sock)
	return nil
}

// ensureDatabase creates the database if missing, set up under a temporary name first.
func (c *Cluster) ensureDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.dsn("postgres"))
	if err != nil {
		return fmt.Errorf("embedded postgres: connect: %w", err)
	}
	defer conn.Close(context.Background()) // nothing to do about a failed close
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
		c.cfg.Database).Scan(&exists); err != nil {
		return fmt.Errorf("embedded postgres: %w", err)
	}
	if exists {
		return nil
	}
	setup := c.cfg.Database + "_setup"
	name, tmp := pgx.Identifier{c.cfg.Database}.Sanitize(), pgx.Identifier{setup}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+tmp+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("embedded postgres: drop %s: %w", setup, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+tmp); err != nil {
		return fmt.Errorf("embedded postgres: create database: %w", err)
	}
	if c.cfg.SetupFunc != nil {
		if err := c.cfg.SetupFunc(ctx, c.dsn(setup)); err != nil {
			return fmt.Errorf("embedded postgres: set up database %s: %w", c.cfg.Database, err)
		}
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+tmp+" RENAME TO "+name); err != nil {
		return fmt.Errorf("embedded postgres: rename database: %w", err)
	}
	c.logger.Info("created the database", "database", c.cfg.Database)
	return nil
}

// run runs a PostgreSQL program, as the postgres user when root, in a session of its own.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setsid: true}
	cmd.WaitDelay = 10 * time.Second // pg_ctl start must not hand our pipes to the server
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), &runError{prog: filepath.Base(name) + " " + args[0], out: strings.TrimSpace(string(out)), err: err}
	}
	return string(out), nil
}

type runError struct {
	prog string
	out  string
	err  error
}

func (e *runError) Error() string {
	if e.out == "" {
		return fmt.Sprintf("%s: %v", e.prog, e.err)
	}
	return fmt.Sprintf("%s: %v: %s", e.prog, e.err, lastLine(e.out))
}

func (e *runError) Unwrap() error { return e.err }

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// quoteConf quotes a postgresql.conf string value.
func quoteConf(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ServerCredential is who PostgreSQL programs run as: nil (this process's user) unless this
// process is root, which PostgreSQL refuses to run as; then the postgres user.
func ServerCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL must run as the postgres user: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("ids of the postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// HasBinaries reports whether dir holds initdb, pg_ctl and postgres.
func HasBinaries(dir string) bool {
	for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return false
		}
	}
	return true
}

// FindBin finds the directory of the PostgreSQL server binaries: the newest
// /usr/lib/postgresql/*/bin, then pg_config --bindir, then the directory of initdb on PATH.
func FindBin() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(matches[j])), filepath.Base(filepath.Dir(matches[i])))
	})
	for _, dir := range matches {
		if HasBinaries(dir) {
			return dir, nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); HasBinaries(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && HasBinaries(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", errors.New("embedded postgres: PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: " +
		"install postgresql, or name their directory (cortexq: --pg-bin, $CORTEXQ_PG_BIN)")
}

// versionLess orders PostgreSQL major versions such as "9.6" and "15" numerically.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}
