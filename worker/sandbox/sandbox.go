// Package sandbox runs a worker's converter program, and everything it starts, in a bubblewrap
// (bwrap) sandbox: its own mount, PID, network, IPC and UTS namespaces, the system's program
// files read-only, an unprivileged uid without capabilities or new privileges, resource limits,
// and a private /tmp of bounded size as the only place it can write. Its output comes back to the
// worker through a pipe, so nothing it does reaches the host's disk. The namespaces are bwrap's;
// this package only builds bwrap's command line and reads the outcome. docs/security.md
// ("Conversions") says what it stops and what it does not.
package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Mode says how a command is run.
type Mode string

// The modes.
const (
	// Bwrap runs the command in a bubblewrap sandbox.
	Bwrap Mode = "bwrap"
	// None runs it as the worker runs, unconfined and without limits.
	None Mode = "none"
)

// ParseMode reads a --sandbox value.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Bwrap, None:
		return Mode(s), nil
	}
	return "", fmt.Errorf("sandbox %q: want bwrap or none", s)
}

// Defaults of Limits.
const (
	MemoryDefault    = 4 << 30
	CPUDefault       = 10 * time.Minute
	FileSizeDefault  = 1 << 30
	ProcessesDefault = 256
	OpenFilesDefault = 1024
	ScratchDefault   = 1 << 30
)

// Limits bound one sandboxed command (with everything it starts).
type Limits struct {
	// MemoryBytes is each process's address space (RLIMIT_AS).
	MemoryBytes int64
	// CPU is each process's CPU time (RLIMIT_CPU; SIGXCPU at it, SIGKILL two seconds later).
	CPU time.Duration
	// FileBytes is the largest file a process may write (RLIMIT_FSIZE).
	FileBytes int64
	// Processes bounds the sandbox's processes and threads together (RLIMIT_NPROC of its uid,
	// counted in its own user namespace).
	Processes int64
	// OpenFiles is each process's open file descriptors (RLIMIT_NOFILE).
	OpenFiles int64
	// ScratchBytes is the size of the private /tmp, the only place the sandbox can write: the
	// command's output included. It is memory (a tmpfs), freed when the command ends.
	ScratchBytes int64
}

// WithDefaults fills in the zero fields.
func (l Limits) WithDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MemoryBytes, MemoryDefault)
	def(&l.FileBytes, FileSizeDefault)
	def(&l.Processes, ProcessesDefault)
	def(&l.OpenFiles, OpenFilesDefault)
	def(&l.ScratchBytes, ScratchDefault)
	if l.CPU <= 0 {
		l.CPU = CPUDefault
	}
	return l
}

// Config configures a Sandbox.
type Config struct {
	Mode Mode
	// Bwrap is the bwrap program ("bwrap", looked up in PATH, if empty).
	Bwrap string
	// ReadOnly are further host paths the command may read, each at its own path.
	ReadOnly []string
	Limits   Limits
	// ProbeDir is where New makes the directory it binds into its probe run (os.TempDir() if
	// empty): the directory the worker's task scratch directories live in.
	ProbeDir string
}

// The sandbox's uid and gid: nobody's. When the worker runs as root, bwrap itself is started as
// this uid, so that the processes of the sandbox are nobody's to the kernel too (root would be
// exempt from the process limit) and cannot read what only root may.
const (
	UID = 65534
	GID = 65534
)

// OutDir is the directory, in the sandbox, whose files come back as the command's output.
const OutDir = "/tmp/out"

// statusMark starts the line the sandbox's shell writes on stderr once the command ended.
const statusMark = "cortexq-sandbox: "

// Sandbox runs commands as its Config says. It is safe for concurrent use.
type Sandbox struct {
	cfg   Config
	bwrap string
	root  bool // the worker runs as root: bwrap is started as UID, GID
	// noUserns: bwrap can refuse the sandbox further user namespaces.
	noUserns bool
}

// New checks cfg and, for Bwrap, runs a probe command in the sandbox: an error means this machine
// cannot sandbox (no bwrap, or no user namespaces for it), with bwrap's own words.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	if cfg.Mode == "" {
		cfg.Mode = Bwrap
	}
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return nil, err
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	s := &Sandbox{cfg: cfg, root: os.Geteuid() == 0}
	if cfg.Mode == None {
		return s, nil
	}
	for _, p := range cfg.ReadOnly {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("sandbox: read-only path %q is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("sandbox: read-only path: %w", err)
		}
	}
	prog := cfg.Bwrap
	if prog == "" {
		prog = "bwrap"
	}
	var err error
	if s.bwrap, err = exec.LookPath(prog); err != nil {
		return nil, fmt.Errorf("sandbox: bwrap: %w (Debian and Ubuntu: apt-get install bubblewrap)", err)
	}
	// --disable-userns came with bwrap 0.8.0 (Debian 12); older ones run without it.
	help, _ := exec.CommandContext(ctx, s.bwrap, "--help").CombinedOutput()
	s.noUserns = bytes.Contains(help, []byte("--disable-userns"))
	if err := s.probe(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Unconfined returns a Sandbox in None mode.
func Unconfined() *Sandbox {
	return &Sandbox{cfg: Config{Mode: None, Limits: Limits{}.WithDefaults()}}
}

// probe runs sh in the sandbox, with a directory made beside the task directories bound in.
func (s *Sandbox) probe(ctx context.Context) error {
	base := s.cfg.ProbeDir
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "cortexq-sandbox-probe*")
	if err != nil {
		return fmt.Errorf("sandbox: probe: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "probe"), []byte("ok\n"), 0o644); err != nil {
		return fmt.Errorf("sandbox: probe: %w", err)
	}
	if err := s.Expose(dir); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	r := s.Run(ctx, Spec{
		Argv: []string{"/bin/sh", "-c", "cat /task/probe && echo probe > " + OutDir + "/probe"}, Dir: "/task",
		Mounts: []Mount{{Host: dir, Sandbox: "/task"}}, Stdout: &stdout, Stderr: &stderr, OutHost: dir,
	})
	switch {
	case r.Err != nil:
		// bwrap's exit status and last words, once.
		return fmt.Errorf("sandbox: %s cannot run a sandbox here (%s)", s.bwrap, strings.TrimPrefix(r.Err.Error(), "sandbox: "))
	case r.ExitCode != 0 || stdout.String() != "ok\n":
		return fmt.Errorf("sandbox: %s cannot run a sandbox here (the probe exited %d: %s)", s.bwrap, r.ExitCode, lastLine(stderr.String(), 300))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "probe")); err != nil || string(b) != "probe\n" {
		return fmt.Errorf("sandbox: probe: the sandbox's output did not come back: %v", err)
	}
	return nil
}

// Mode reports the sandbox's mode.
func (s *Sandbox) Mode() Mode { return s.cfg.Mode }

// String describes the sandbox for the worker's start-up line.
func (s *Sandbox) String() string {
	if s.cfg.Mode == None {
		return "none"
	}
	l := s.cfg.Limits
	return fmt.Sprintf("bwrap (uid %d, no network, memory %s, cpu %s, file size %s, processes %d, open files %d, scratch %s)",
		UID, bytesString(l.MemoryBytes), l.CPU, bytesString(l.FileBytes), l.Processes, l.OpenFiles, bytesString(l.ScratchBytes))
}

// Expose lets the sandbox's uid read the directory trees dirs (which a worker running as root
// made): directories become searchable and readable by others, files readable. A no-op unless the
// worker runs as root in Bwrap mode.
func (s *Sandbox) Expose(dirs ...string) error {
	if s.cfg.Mode == None || !s.root {
		return nil
	}
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			add := fs.FileMode(0o004)
			if e.IsDir() {
				add = 0o005
			}
			if fi.Mode().Perm()&add == add {
				return nil
			}
			return os.Chmod(p, fi.Mode().Perm()|add)
		})
		if err != nil {
			return fmt.Errorf("sandbox: expose: %w", err)
		}
	}
	return nil
}

// ExposePath lets the sandbox's uid reach (search) dir itself, without listing it: for a task's
// scratch directory, which holds the tree given to Expose.
func (s *Sandbox) ExposePath(dir string) error {
	if s.cfg.Mode == None || !s.root {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("sandbox: expose: %w", err)
	}
	if err := os.Chmod(dir, fi.Mode().Perm()|0o001); err != nil {
		return fmt.Errorf("sandbox: expose: %w", err)
	}
	return nil
}

// Mount binds a host path into the sandbox, read-only.
type Mount struct {
	Host, Sandbox string
}

// Spec is one command to run.
type Spec struct {
	// Argv is the program and its arguments, with paths as the sandbox sees them.
	Argv []string
	// Dir is the working directory in the sandbox.
	Dir string
	// Mounts are the task's inputs.
	Mounts []Mount
	// Dirs are directories to make under OutDir before the command starts (Bwrap mode).
	Dirs []string
	// Stdout and Stderr receive the command's output streams (discarded if nil).
	Stdout, Stderr io.Writer
	// OutHost is the host directory that receives the regular files the command left in OutDir
	// (in None mode the command writes there itself: see Paths).
	OutHost string
	// Setup, if set, runs on the command before it starts (None mode: to set its process group).
	Setup func(*exec.Cmd)
	// Timeout, in Bwrap mode, ends the command (SIGTERM, SIGKILL two seconds later) after this
	// long, and then its output is still copied back: give ctx a deadline some seconds later as
	// a backstop. Zero: none. None mode: ctx's deadline is the timeout.
	Timeout time.Duration
}

// Result is how a command ended.
type Result struct {
	// Err is the error of starting or waiting for the command (bwrap, in Bwrap mode): nil for a
	// command that ran and exited, whatever its status.
	Err error
	// ExitCode is the command's exit status; Signal, if not zero, the signal that ended it.
	ExitCode int
	Signal   syscall.Signal
	// TimedOut reports that Spec.Timeout ended the command.
	TimedOut bool
	// Limit names the limit the command reached, if that is what ended it: memory_limit,
	// cpu_limit, file_size_limit or scratch_limit ("" otherwise).
	Limit string
	// OutErr is an error copying the output back (too large, unreadable).
	OutErr error
}

// Run runs spec; it returns once the command and everything it started are gone. Cancelling ctx
// kills it all.
func (s *Sandbox) Run(ctx context.Context, spec Spec) Result {
	if s.cfg.Mode == None {
		return s.runNone(ctx, spec)
	}
	return s.runBwrap(ctx, spec)
}

func (s *Sandbox) runNone(ctx context.Context, spec Spec) Result {
	cmd := exec.CommandContext(ctx, spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	if spec.Setup != nil {
		spec.Setup(cmd)
	}
	err := cmd.Run()
	r := Result{}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.ExitCode = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Signal = ws.Signal()
		}
	} else {
		r.Err = err
	}
	return r
}

// script runs in the sandbox as sh -c script sh argv...: the command with the limits in a
// subshell (so that the shell itself can still fork once the command used up the processes),
// then every process the command left is killed, the status line is written, and OutDir is sent
// as a tar stream on fd 3, which the command does not get.
const script = `(ulimit -S -t "$CPUS" && ulimit -H -t "$CPUH" && ulimit -v "$MEMKB" && ulimit -f "$FSBLK" && ulimit -n "$NOFILE" && ulimit -p "$NPROC" &&
if [ -n "$TIMEOUT" ]; then exec timeout -k 2 "$TIMEOUT" "$@"; else exec "$@"; fi) 3>&-
s=$?
kill -9 -1 2>/dev/null; kill -9 -1 2>/dev/null
echo "` + statusMark + `status $s free $(stat -f -c '%a %S' /tmp)" >&2
cd ` + OutDir + ` && tar -cf - . >&3
exit $s`

// bwrapArgs are the sandbox's bwrap arguments, up to the command.
func (s *Sandbox) bwrapArgs(spec Spec) []string {
	l := s.cfg.Limits
	a := []string{
		"--unshare-all", "--unshare-user",
		"--uid", strconv.Itoa(UID), "--gid", strconv.Itoa(GID), "--hostname", "sandbox",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--clearenv",
		"--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
		"--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp", "--setenv", "LANG", "C.UTF-8",
		"--setenv", "CPUS", strconv.FormatInt(int64(l.CPU.Seconds()+0.999), 10),
		"--setenv", "CPUH", strconv.FormatInt(int64(l.CPU.Seconds()+0.999)+2, 10),
		"--setenv", "MEMKB", strconv.FormatInt(l.MemoryBytes>>10, 10),
		"--setenv", "FSBLK", strconv.FormatInt(l.FileBytes/512, 10),
		"--setenv", "NOFILE", strconv.FormatInt(l.OpenFiles, 10),
		"--setenv", "NPROC", strconv.FormatInt(l.Processes, 10),
		"--ro-bind", "/usr", "/usr",
	}
	if s.noUserns {
		a = append(a, "--disable-userns")
	}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, e := range etc {
		a = append(a, "--ro-bind-try", "/etc/"+e, "/etc/"+e)
	}
	for _, p := range varData {
		a = append(a, "--ro-bind-try", p, p)
	}
	for _, p := range s.cfg.ReadOnly {
		a = append(a, "--ro-bind", p, p)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev",
		"--size", strconv.FormatInt(l.ScratchBytes, 10), "--tmpfs", "/tmp", "--dir", OutDir)
	for _, d := range spec.Dirs {
		a = append(a, "--dir", path.Join(OutDir, d))
	}
	for _, m := range spec.Mounts {
		a = append(a, "--ro-bind", m.Host, m.Sandbox)
	}
	// The root (bwrap's own tmpfs, which holds the mount points) and /dev (another tmpfs, /dev/shm
	// included) read-only: /tmp is the only place to write, and it has a size. The devices
	// (/dev/null, ...) still work.
	a = append(a, "--remount-ro", "/dev", "--remount-ro", "/")
	if spec.Dir != "" {
		a = append(a, "--chdir", spec.Dir)
	}
	if spec.Timeout > 0 {
		a = append(a, "--setenv", "TIMEOUT", strconv.FormatFloat(spec.Timeout.Seconds(), 'f', 3, 64))
	}
	return a
}

// etc are the entries of /etc the sandbox sees (those that exist): what the dynamic linker,
// Perl, kpathsea (TeX), ImageMagick, Ghostscript, fontconfig and libxml2 read, and the
// alternatives' links (/usr/bin/convert is one). No passwd, no hosts, no keys.
var etc = []string{
	"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "perl", "texmf",
	"ImageMagick-6", "ImageMagick-7", "ghostscript", "fonts", "papersize", "libpaper.d", "xml",
	"sgml", "mime.types", "magic", "magic.mime",
}

// varData are the system's generated data under /var that the programs read: TeX's file name
// databases (ls-R, which /usr/share/texmf links to) and formats, and fontconfig's cache.
// Without them kpathsea searches the disk, and fontconfig rebuilds its cache, every time.
var varData = []string{"/var/lib/texmf", "/var/cache/fontconfig"}

func (s *Sandbox) runBwrap(ctx context.Context, spec Spec) Result {
	args := append(s.bwrapArgs(spec), "--", "/bin/sh", "-c", script, "sh")
	args = append(args, spec.Argv...)
	cmd := exec.CommandContext(ctx, s.bwrap, args...)
	stderr := &markTail{w: spec.Stderr}
	cmd.Stdout, cmd.Stderr = spec.Stdout, stderr
	if cmd.Stdout == nil {
		cmd.Stdout = io.Discard
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.root {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: UID, Gid: GID, Groups: []uint32{}}
	}
	// bwrap's own process group; the sandbox's processes die with its PID namespace.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	pr, pw, err := os.Pipe()
	if err != nil {
		return Result{Err: fmt.Errorf("sandbox: %w", err)}
	}
	cmd.ExtraFiles = []*os.File{pw}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return Result{Err: fmt.Errorf("sandbox: %w", err)}
	}
	pw.Close()
	outErr := make(chan error, 1)
	go func() {
		err := untar(pr, spec.OutHost, s.cfg.Limits.ScratchBytes)
		_, _ = io.Copy(io.Discard, pr) // whatever is left, so that the sandbox is never stuck on it
		pr.Close()
		outErr <- err
	}()
	err = cmd.Wait()
	stderr.flush()
	r := Result{OutErr: <-outErr}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && !stderr.seen:
		// bwrap failed (or was killed) before the command ended.
		r.Err = fmt.Errorf("sandbox: %s: %s", exit, lastLine(stderr.tail.String(), 300))
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Signal = ws.Signal()
		}
		r.ExitCode = -1
		return r
	case err != nil && !errors.As(err, &exit):
		r.Err = fmt.Errorf("sandbox: %w", err)
		return r
	}
	r.ExitCode = stderr.status
	if r.ExitCode > 128 && r.ExitCode < 128+65 {
		r.Signal = syscall.Signal(r.ExitCode - 128)
	}
	switch {
	case spec.Timeout > 0 && (r.ExitCode == 124 || r.Signal == syscall.SIGKILL && time.Since(start) >= spec.Timeout):
		// timeout(1) exits 124, or dies of the SIGKILL it sends two seconds after SIGTERM.
		r.TimedOut = true
	case stderr.free < 64<<10:
		r.Limit = "scratch_limit" // whatever the status: what it wrote last may be cut
	case r.ExitCode == 0:
	case r.Signal == syscall.SIGXCPU:
		r.Limit = "cpu_limit"
	case r.Signal == syscall.SIGXFSZ:
		r.Limit = "file_size_limit"
	case stderr.oom:
		r.Limit = "memory_limit"
	}
	if r.OutErr != nil && r.Limit == "" && errors.Is(r.OutErr, errTooLarge) {
		r.Limit = "scratch_limit"
	}
	return r
}

// markTail passes the command's stderr on, keeps its tail, and reads the shell's status line.
type markTail struct {
	w      io.Writer
	tail   tailBuffer
	line   []byte
	seen   bool
	status int
	free   int64
	oom    bool
}

func (m *markTail) Write(p []byte) (int, error) {
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			m.line = append(m.line, rest...)
			if len(m.line) > 4096 { // no status line: pass it on
				m.pass(m.line)
				m.line = m.line[:0]
			}
			break
		}
		m.line = append(m.line, rest[:i+1]...)
		if !m.endLine() {
			m.pass(m.line)
		}
		m.line = m.line[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}

// pass keeps b in the tail and writes it on; the command's stderr is best effort.
func (m *markTail) pass(b []byte) {
	m.tail.Write(b)
	if m.w != nil {
		_, _ = m.w.Write(b)
	}
}

// flush passes on an unfinished last line.
func (m *markTail) flush() {
	if len(m.line) > 0 {
		m.pass(m.line)
		m.line = m.line[:0]
	}
}

// endLine reads the line in m.line and reports whether it is the shell's status line.
func (m *markTail) endLine() bool {
	line := strings.TrimSuffix(string(m.line), "\n")
	if strings.Contains(line, "Out of memory") {
		m.oom = true
	}
	rest, ok := strings.CutPrefix(line, statusMark)
	if !ok {
		return false
	}
	// "status N free BLOCKS BLOCKSIZE"
	f := strings.Fields(rest)
	if len(f) != 5 || f[0] != "status" || f[2] != "free" {
		return false
	}
	st, err1 := strconv.Atoi(f[1])
	blocks, err2 := strconv.ParseInt(f[3], 10, 64)
	bs, err3 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return false
	}
	m.seen, m.status, m.free = true, st, blocks*bs
	return true
}

var errTooLarge = errors.New("the output is larger than the sandbox's scratch space")

// untar writes the regular files of the tar stream r under dir (made if missing), at most max
// bytes in all. Anything else (links, devices, names leaving dir) is skipped.
func untar(r io.Reader, dir string, max int64) error {
	if dir == "" {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sandbox output: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." || !fs.ValidPath(name) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("sandbox output: %w", err)
			}
			continue
		case tar.TypeReg:
		default:
			continue
		}
		if total += h.Size; total > max {
			return errTooLarge
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("sandbox output: %w", err)
			}
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("sandbox output: %w", err)
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sandbox output: %w", err)
		}
	}
}

// lastLine is the last line of a command's output, at most n bytes.
func lastLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) {
	t.b = append(t.b, p...)
	if len(t.b) > 4<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-4<<10:]...)
	}
}

func (t *tailBuffer) String() string { return string(t.b) }

func bytesString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}
