package latexml

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
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
