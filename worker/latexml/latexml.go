// Package latexml is a worker.Handler that converts LaTeX source archives to HTML with
// LaTeXML's latexmlc, the conversion CorTeX's fleet runs for the service tex_to_html.
//
// Per task it unpacks the source zip safely (Unpack), picks the main .tex (FindMain), runs
// latexmlc --format=html5 on it with a timeout, and answers with a result zip that holds the
// HTML and its assets, LaTeXML's own log as latexml.log, and a cortex.log written CorTeX's way
// (MapLog): LaTeXML's Severity:category:what details messages, then one Status:conversion:N
// line. A source archive that cannot be converted at all is answered with
// Fatal:invalid:<category> (an Invalid task); a latexmlc that crashes (killed by a signal, or
// failing without a status line or a Fatal message) gets an empty result, as the Perl worker
// of the CorTeX fleet sends, which the dispatcher retries and dead-letters after three attempts.
package latexml

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/worker/sandbox"
)

// Defaults of Config.
const (
	LatexmlcDefault = "latexmlc"
	TimeoutDefault  = 5 * time.Minute
)

// maxRawLogBytes is the largest LaTeXML log put in the result as latexml.log.
const maxRawLogBytes = 32 << 20

// killGrace is how long latexmlc's process group has to go once killed, before its pipes are
// closed on it.
const killGrace = 5 * time.Second

// Config configures a Converter.
type Config struct {
	// Latexmlc is the latexmlc program (LatexmlcDefault, looked up in PATH, if empty).
	Latexmlc string
	// Args are extra arguments given to latexmlc before the source file, e.g. --preload=...
	Args []string
	// Timeout bounds one conversion (TimeoutDefault if zero). A conversion that runs longer is
	// killed, with its process group, and its task answered Fatal:timeout:wallclock. Keep the
	// service's lease timeout above it.
	Timeout time.Duration
	// Limits bound the unpacked source archive.
	Limits Limits
	// Logger receives a line per conversion (slog.Default() if nil).
	Logger *slog.Logger
	// Sandbox runs latexmlc (nil: unsandboxed, as sandbox.None). docs/latexml.md says how.
	Sandbox *sandbox.Sandbox
}

// Converter converts source archives with latexmlc. It is a worker.Handler, safe for concurrent
// use.
type Converter struct {
	cfg Config
}

// New returns a Converter for cfg, with its defaults filled in.
func New(cfg Config) *Converter {
	if cfg.Latexmlc == "" {
		cfg.Latexmlc = LatexmlcDefault
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = TimeoutDefault
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Sandbox == nil {
		cfg.Sandbox = sandbox.Unconfined()
	}
	return &Converter{cfg: cfg}
}

// ErrCrashed is what Convert returns (wrapped) when latexmlc crashed: the worker then sends an
// empty result.
var ErrCrashed = errors.New("latexmlc crashed")

// Convert converts the source archive at in and writes the result archive to out. Its scratch
// files go in out's directory, which the worker loop removes afterwards.
func (c *Converter) Convert(ctx context.Context, in, out string) error {
	work, err := os.MkdirTemp(filepath.Dir(out), "latexml*")
	if err != nil {
		return fmt.Errorf("latexml: %w", err)
	}
	defer os.RemoveAll(work)
	src, html := filepath.Join(work, "src"), filepath.Join(work, "html")
	for _, d := range []string{src, html} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("latexml: %w", err)
		}
	}

	var head bytes.Buffer // the worker's own lines, before LaTeXML's
	began := time.Now()
	skipped, err := Unpack(in, src, c.cfg.Limits)
	var main string
	if err == nil {
		main, err = FindMain(src)
	}
	t := &stageTimes{unpack: time.Since(began), convert: -1}
	var inv *InvalidError
	if errors.As(err, &inv) {
		c.cfg.Logger.Info("source archive invalid", "category", inv.Category, "details", inv.Details)
		fmt.Fprintf(&head, "Fatal:invalid:%s %s\nStatus:conversion:%d\n", inv.Category, oneLine(inv.Details), LevelInvalid)
		return writeResult(out, head.Bytes(), "", "", t)
	}
	if err != nil {
		return fmt.Errorf("latexml: %w", err)
	}
	for _, s := range skipped {
		fmt.Fprintf(&head, "Warning:archive:not_a_file %s was skipped: only regular files and directories are unpacked\n", oneLine(s))
	}
	fmt.Fprintf(&head, "Info:cortexq:main_tex %s\n", oneLine(main))

	stem := strings.TrimSuffix(path.Base(main), path.Ext(main))
	rawLog := filepath.Join(work, "latexml.log")
	scratch := src // the source directory as latexmlc sees it, cut from its log's paths
	if c.cfg.Sandbox.Mode() == sandbox.None {
		run := c.run(ctx, filepath.Join(src, filepath.FromSlash(main)), filepath.Join(html, stem+".html"), rawLog, nil)
		t.convert = run.took
		return c.answer(ctx, out, main, head.Bytes(), run, rawLog, html, scratch, t)
	}
	// Sandboxed: the source is read-only at /task/src; latexmlc writes the HTML and its log in
	// the sandbox's own /tmp, and they come back into work/out.
	if err := c.cfg.Sandbox.ExposePath(filepath.Dir(out)); err != nil {
		return fmt.Errorf("latexml: %w", err)
	}
	if err := c.cfg.Sandbox.ExposePath(work); err != nil {
		return fmt.Errorf("latexml: %w", err)
	}
	if err := c.cfg.Sandbox.Expose(src); err != nil {
		return fmt.Errorf("latexml: %w", err)
	}
	outHost := filepath.Join(work, "out")
	scratch = sandboxSrc
	run := c.run(ctx, path.Join(sandboxSrc, main), path.Join(sandbox.OutDir, "html", stem+".html"), path.Join(sandbox.OutDir, "latexml.log"),
		&sandbox.Spec{Mounts: []sandbox.Mount{{Host: src, Sandbox: sandboxSrc}}, Dirs: []string{"html"}, OutHost: outHost})
	t.convert = run.took
	return c.answer(ctx, out, main, head.Bytes(), run, filepath.Join(outHost, "latexml.log"), filepath.Join(outHost, "html"), scratch, t)
}

// sandboxBackstop is how long past the timeout a sandboxed latexmlc is killed from outside, if
// the sandbox has not ended it and sent its output by then.
const sandboxBackstop = 15 * time.Second

// sandboxSrc is where a sandboxed latexmlc finds the task's source.
const sandboxSrc = "/task/src"

// answer writes the result of a latexmlc run: latexml.log, the HTML and cortex.log (head, the
// mapped log, the worker's verdict and its stage line).
func (c *Converter) answer(ctx context.Context, out, main string, head []byte, run *run, rawLog, html, scratch string, t *stageTimes) error {
	if ctx.Err() != nil {
		return fmt.Errorf("latexml: %w", ctx.Err()) // the worker is stopping: no verdict
	}

	var body bytes.Buffer
	body.Write(head)
	sum := LogSummary{Status: LevelNone, Worst: LevelNone}
	if f, err := openNoFollow(rawLog); err == nil {
		sum, err = MapLog(f, &body, scratch)
		f.Close()
		if err != nil {
			return fmt.Errorf("latexml: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("latexml: %w", err)
	}
	if sum.Cut {
		fmt.Fprintf(&body, "Warning:cortexq:log_cut the LaTeXML log was longer than %d bytes; the rest is in latexml.log\n", maxMappedBytes)
	}
	level := sum.Level()
	switch {
	case run.timedOut:
		fmt.Fprintf(&body, "Fatal:timeout:wallclock latexmlc ran longer than %s and was killed\n", c.cfg.Timeout)
		level = LevelFatal
	case run.limit != "":
		fmt.Fprintf(&body, "Fatal:sandbox:%s latexmlc reached the sandbox's %s and was stopped (%s)\n", run.limit, limitNames[run.limit], run.exit())
		level = LevelFatal
	case run.crashed(sum):
		c.cfg.Logger.Warn("latexmlc crashed; sending an empty result", "main", main, "err", run.err, "stderr", run.stderrTail())
		return fmt.Errorf("%w: %v: %s", ErrCrashed, run.err, run.stderrTail())
	}
	fmt.Fprintf(&body, "Info:cortexq:latexmlc ran %.2f s, %s\n", run.took.Seconds(), run.exit())
	fmt.Fprintf(&body, "Status:conversion:%d\n", level)
	c.cfg.Logger.Info("converted", "main", main, "level", level, "messages", sum.Messages, "took", run.took.Round(time.Millisecond))
	return writeResult(out, body.Bytes(), rawLog, html, t)
}

// stageTimes are the worker's stages (docs/stages.md#the-stage-line): unpack is the source
// unpacked and its main file found, convert the latexmlc run (negative: none), and the pack,
// timed by writeResult, the result archive written up to its cortex.log.
type stageTimes struct {
	unpack, convert time.Duration
}

// run is how one latexmlc run ended.
type run struct {
	err      error // starting or waiting for it failed (bwrap failed, in a sandbox)
	code     int   // its exit status
	signal   syscall.Signal
	limit    string // the sandbox limit it reached, if any
	timedOut bool
	took     time.Duration
	stderr   tailBuffer
}

// limitNames says what each sandbox limit is, for cortex.log.
var limitNames = map[string]string{
	"memory_limit":    "memory limit",
	"cpu_limit":       "CPU time limit",
	"file_size_limit": "file size limit",
	"scratch_limit":   "scratch space",
}

// crashed reports whether the run ended without a verdict: killed by a signal, or failed with
// neither a status line nor a Fatal message in its log.
func (r *run) crashed(sum LogSummary) bool {
	switch {
	case r.err != nil, r.signal != 0:
		return true
	case r.code == 0:
		return false
	}
	return sum.Status == LevelNone && sum.Worst < LevelFatal
}

func (r *run) exit() string {
	switch {
	case r.timedOut:
		return "killed at the timeout"
	case r.err != nil:
		return r.err.Error()
	case r.signal != 0:
		return "signal: " + r.signal.String()
	}
	return fmt.Sprintf("exit status %d", r.code)
}

func (r *run) stderrTail() string { return lastLine(r.stderr.String()) }

// run runs latexmlc on the file main, writing the HTML to dest and LaTeXML's log to logPath
// (paths as latexmlc sees them): unsandboxed if spec is nil, else in c.cfg.Sandbox with spec's
// mounts.
func (c *Converter) run(ctx context.Context, main, dest, logPath string, spec *sandbox.Spec) *run {
	timeout := c.cfg.Timeout
	if spec != nil {
		// The sandbox ends latexmlc at the timeout itself, and then sends what it wrote; the
		// context is the backstop.
		spec.Timeout = timeout
		timeout += sandboxBackstop
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := append([]string{c.cfg.Latexmlc, "--format=html5", "--dest=" + dest, "--log=" + logPath}, c.cfg.Args...)
	args = append(args, path.Base(main))
	r := &run{}
	if spec == nil {
		spec = &sandbox.Spec{}
	}
	spec.Argv, spec.Dir, spec.Stderr = args, path.Dir(main), &r.stderr
	spec.Setup = func(cmd *exec.Cmd) {
		// Its own process group, killed whole: latexmlc may start helpers (kpsewhich, converters).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = killGrace
	}
	start := time.Now()
	res := c.cfg.Sandbox.Run(tctx, *spec)
	r.took = time.Since(start)
	r.err, r.code, r.signal, r.limit = res.Err, res.ExitCode, res.Signal, res.Limit
	if res.OutErr != nil && r.err == nil && r.limit == "" {
		r.err = res.OutErr
	}
	r.timedOut = res.TimedOut || (r.err != nil || r.code != 0 || r.signal != 0) && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded)
	return r
}

// openNoFollow opens a file the conversion wrote, refusing a symbolic link (one a hostile
// conversion left in place of its log, pointing at a host file).
func openNoFollow(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// writeResult writes the result zip: LaTeXML's log (if it is at most maxRawLogBytes), every
// file under html, at the archive's top level, and cortex.log last, ending in the stage line
// of t, its pack stage the time the archive took up to it.
func writeResult(out string, cortexLog []byte, rawLog, html string, t *stageTimes) (err error) {
	began := time.Now()
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("latexml: result: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("latexml: result: %w", cerr)
		}
	}()
	zw := zip.NewWriter(f)
	if rawLog != "" {
		if fi, serr := os.Lstat(rawLog); serr == nil && fi.Mode().IsRegular() && fi.Size() <= maxRawLogBytes {
			err = addFile(zw, "latexml.log", rawLog)
		}
	}
	if _, serr := os.Lstat(html); serr != nil {
		html = "" // a sandboxed latexmlc killed before its output came back
	}
	if err == nil && html != "" {
		err = filepath.WalkDir(html, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(html, p)
			if err != nil {
				return err
			}
			return addFile(zw, filepath.ToSlash(rel), p)
		})
	}
	if err == nil {
		err = writeCortexLog(zw, cortexLog, queue.StageLine(t.unpack, t.convert, time.Since(began)))
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return fmt.Errorf("latexml: result: %w", err)
	}
	return nil
}

// writeCortexLog adds cortex.log: log, then the stage line.
func writeCortexLog(zw *zip.Writer, log []byte, stageLine string) error {
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "cortex.log", Method: zip.Deflate, Modified: time.Now()})
	if err != nil {
		return err
	}
	if _, err = w.Write(log); err != nil {
		return err
	}
	_, err = io.WriteString(w, stageLine+"\n")
	return err
}

func addFile(zw *zip.Writer, name, p string) error {
	src, err := openNoFollow(p)
	if err != nil {
		return err
	}
	defer src.Close()
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Now()})
	if err != nil {
		return err
	}
	_, err = io.Copy(w, src)
	return err
}

// oneLine keeps text from a source archive on one cortex.log line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

const tailBytes = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailBytes {
		t.b = append(t.b[:0], t.b[len(t.b)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
