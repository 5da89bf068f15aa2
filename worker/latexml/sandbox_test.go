package latexml

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/worker/sandbox"
)

// scratchDir is a directory the sandbox's uid can reach (t.TempDir's parents are root's
// alone when the tests run as root), as the worker's TMPDIR must be.
func scratchDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cortexq-latexml-test*")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o711))
	t.Cleanup(func() { require.NoError(t, os.RemoveAll(dir)) })
	return dir
}

// newSandbox returns a bwrap sandbox with limits (defaults where zero).
func newSandbox(t testing.TB, limits sandbox.Limits) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap, Limits: limits, ProbeDir: scratchDir(t)})
	require.NoError(t, err, "bwrap is required (scripts/install-deps installs bubblewrap)")
	return sb
}

// convertIn converts the source archive src as the worker loop would: in a 0700 task directory
// of its own under a directory the sandbox can reach. It returns the result's cortex.log and
// members, and the task directory's size in bytes just before Convert returned.
func convertIn(t *testing.T, c *Converter, src string) (string, map[string][]byte) {
	t.Helper()
	dir, err := os.MkdirTemp(scratchDir(t), "cortex_task*")
	require.NoError(t, err)
	in := filepath.Join(dir, "task.zip")
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(in, data, 0o600))
	out := filepath.Join(dir, "task.result.zip")
	require.NoError(t, c.Convert(context.Background(), in, out))
	log, members := readResult(t, out)
	return log, members
}

// hostile is a paper whose binding (evilpkg.sty.ltxml, Perl that latexmlc runs) does what body
// says; main.tex uses it, and inputs extra.
func hostile(t *testing.T, body, extra string) string {
	t.Helper()
	binding := "package LaTeXML::Package::Pool;\nuse strict;\nuse warnings;\nuse LaTeXML::Package;\nuse POSIX ();\nuse IO::Socket::INET;\n" + body + "\n1;\n"
	return makeZip(t,
		[2]string{"main.tex", "\\documentclass{article}\n\\usepackage{evilpkg}\n\\begin{document}\nHello.\n" + extra + "\n\\end{document}\n"},
		[2]string{"evilpkg.sty", "\\ProvidesPackage{evilpkg}\n"},
		[2]string{"evilpkg.sty.ltxml", binding})
}

// A binding and \input cannot read a host file, write outside the task (the worker's /tmp, a
// corpus directory that anyone may write), or reach a listener on the host's loopback. The
// same paper unsandboxed does all three, so the test's paper does what it claims.
func TestSandboxContainsReadWriteConnect(t *testing.T) {
	t.Parallel()
	needLatexmlc(t)
	secretDir := scratchDir(t)
	secret := "cortexqsecret" + strconv.FormatInt(time.Now().UnixNano(), 36)
	secretFile := filepath.Join(secretDir, "secret.tex")
	require.NoError(t, os.WriteFile(secretFile, []byte(secret+"\n"), 0o644))
	corpus := scratchDir(t)
	require.NoError(t, os.Chmod(corpus, 0o777))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var connections atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			_ = conn.Close()
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	port := ln.Addr().(*net.TCPAddr).Port

	run := func(t *testing.T, sb *sandbox.Sandbox) (string, string, []string, string) {
		tmpFile := filepath.Join(os.TempDir(), "cortexq-pwned-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		corpusFile := filepath.Join(corpus, "pwned.txt")
		t.Cleanup(func() { _ = os.Remove(tmpFile); _ = os.Remove(corpusFile) })
		src := hostile(t, fmt.Sprintf(`
for my $f (%q, %q) { if (open(my $w, '>', $f)) { print $w "pwned\n"; close($w); } }
my $stolen = 'none';
if (open(my $r, '<', %q)) { local $/; $stolen = <$r>; close($r); }
$stolen =~ s/\s+//g;
DefMacro('\stolen', 'Binding read: ' . $stolen . '.');
my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => %d, Proto => 'tcp', Timeout => 3);
if ($s) { print $s "hello\n"; close($s); }`, tmpFile, corpusFile, secretFile, port),
			"\\stolen\n\nInput: \\input{"+strings.TrimSuffix(secretFile, ".tex")+"}\n")
		log, members := convertIn(t, New(Config{Logger: discard(), Sandbox: sb, Timeout: 2 * time.Minute}), src)
		var all bytes.Buffer
		for _, b := range members {
			all.Write(b)
		}
		var written []string
		for _, f := range []string{tmpFile, corpusFile} {
			if _, err := os.Stat(f); err == nil {
				written = append(written, f)
			}
		}
		return log, all.String(), written, fmt.Sprint(connections.Load())
	}

	t.Run("Sandboxed", func(t *testing.T) {
		log, result, written, conns := run(t, newSandbox(t, sandbox.Limits{}))
		require.Equal(t, "0", conns, "the host's loopback is not reached")
		require.NotContains(t, result, secret, "the host file is not in the result")
		require.Contains(t, result, "Binding read: none", "the binding ran, and read nothing")
		require.Empty(t, written, "nothing is written outside the task")
		rep := parseLog([]byte(log))
		require.Equal(t, queue.StatusError, rep.Status, log)
		require.Contains(t, messageKeys(rep), "error:missing_file:"+strings.TrimSuffix(secretFile, ".tex"), log)
	})
	t.Run("Unsandboxed", func(t *testing.T) {
		before := connections.Load()
		_, result, written, _ := run(t, sandbox.Unconfined())
		require.Contains(t, result, "Binding read: "+secret, "unsandboxed, the binding reads the host file")
		require.Len(t, written, 2, "unsandboxed, the binding writes outside the task")
		require.Greater(t, connections.Load(), before, "unsandboxed, the binding reaches the host's loopback")
	})
}

// processesNamed counts the host's processes whose command line holds mark.
func processesNamed(mark string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(mark)) {
			n++
		}
	}
	return n
}

// Papers that go after the machine's resources end at the sandbox's limits, each with the
// cause in cortex.log, and leave no process behind.
func TestSandboxLimits(t *testing.T) {
	t.Parallel()
	needLatexmlc(t)
	limits := sandbox.Limits{MemoryBytes: 1 << 30, CPU: 4 * time.Second, FileBytes: 16 << 20, Processes: 32, OpenFiles: 256, ScratchBytes: 64 << 20}
	sb := newSandbox(t, limits)
	mark := func(name string) string {
		return "cortexq-" + name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}

	for _, tc := range []struct {
		name, body string
		timeout    time.Duration
		want       string // the Fatal message's category:what
	}{
		{name: "MemoryHog", want: "sandbox:memory_limit", body: `my $x = 'x' x (1 << 31); DefMacro('\hog', length($x));`},
		{name: "CPUHog", want: "sandbox:cpu_limit", body: `my $i = 0; $i++ while 1;`},
		{name: "BigFile", want: "sandbox:file_size_limit", body: `open(my $w, '>', '/tmp/big') or die; print $w ('x' x (1 << 20)) for 1 .. 64; close($w);`},
		{name: "DiskFiller", want: "sandbox:scratch_limit", body: `for my $i (1 .. 1000) { open(my $w, '>', "/tmp/fill$i") or last; print $w ('x' x (1 << 20)); close($w) or last; }`},
		// Every process forks every 20 ms, for ever; the processes stay at the limit, and the
		// task ends at the timeout (each spends little CPU time).
		{name: "ForkBomb", want: "timeout:wallclock", timeout: 8 * time.Second, body: `$0 = '%s'; while (1) { fork(); select(undef, undef, undef, 0.02); }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := mark(tc.name)
			body := tc.body
			if strings.Contains(body, "%s") {
				body = fmt.Sprintf(body, m)
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 2 * time.Minute
			}
			stop := make(chan struct{})
			var most atomic.Int64
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					if n := int64(processesNamed(m)); n > most.Load() {
						most.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
			})
			log, _ := convertIn(t, New(Config{Logger: discard(), Sandbox: sb, Timeout: timeout}), hostile(t, body, ""))
			close(stop)
			wg.Wait()
			rep := parseLog([]byte(log))
			require.Equal(t, queue.StatusFatal, rep.Status, log)
			require.Contains(t, messageKeys(rep), "fatal:"+tc.want, log)
			require.Zero(t, processesNamed(m), "no process is left")
			require.LessOrEqual(t, most.Load(), limits.Processes, "the processes stay within the limit")
			if tc.name == "ForkBomb" {
				require.Greater(t, most.Load(), int64(limits.Processes/2), "the bomb went off")
			}
		})
	}
}

// A child that daemonizes (a new session, its parent gone) does not outlive the conversion.
func TestSandboxEndsDaemons(t *testing.T) {
	t.Parallel()
	needLatexmlc(t)
	m := "cortexq-daemon-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	src := hostile(t, fmt.Sprintf(`
my $pid = fork();
if (defined $pid && $pid == 0) {
	POSIX::setsid();
	exit 0 if fork();
	$0 = '%s';
	open(STDIN, '<', '/dev/null'); open(STDOUT, '>', '/dev/null'); open(STDERR, '>', '/dev/null');
	sleep 1 while 1;
}
waitpid($pid, 0) if $pid;
select(undef, undef, undef, 0.3);
DefMacro('\daemons', 'daemon started');`, m), "\\daemons\n")
	t.Cleanup(func() { _ = exec.Command("pkill", "-KILL", "-f", m).Run() })
	log, members := convertIn(t, New(Config{Logger: discard(), Sandbox: newSandbox(t, sandbox.Limits{})}), src)
	require.Equal(t, queue.StatusNoProblem, parseLog([]byte(log)).Status, log)
	require.Contains(t, string(members["main.html"]), "daemon started", "the binding ran")
	require.Zero(t, processesNamed(m), "the daemon is gone once Convert returns")
}
