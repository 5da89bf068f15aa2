package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reachable is a directory the sandbox's uid can reach, as the worker's TMPDIR must be.
func reachable(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cortexq-sandbox-test*")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o711))
	t.Cleanup(func() { require.NoError(t, os.RemoveAll(dir)) })
	return dir
}

func newBwrap(t *testing.T, limits Limits) *Sandbox {
	t.Helper()
	sb, err := New(context.Background(), Config{Mode: Bwrap, Limits: limits, ProbeDir: reachable(t)})
	require.NoError(t, err, "bwrap is required (scripts/install-deps installs bubblewrap)")
	return sb
}

// sh runs script in sb and returns its stdout, stderr and result.
func sh(t *testing.T, sb *Sandbox, spec Spec, script string) (string, string, Result) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	spec.Argv, spec.Stdout, spec.Stderr = []string{"/bin/sh", "-c", script}, &stdout, &stderr
	if spec.OutHost == "" {
		spec.OutHost = filepath.Join(reachable(t), "out")
	}
	r := sb.Run(context.Background(), spec)
	require.NoError(t, r.Err, stderr.String())
	return stdout.String(), stderr.String(), r
}

// The sandbox sees the system's programs and nothing else of the host: no home, no /run, no
// worker environment, no network but its own loopback, no capabilities, uid 65534.
func TestSandboxSeesLittleOfTheHost(t *testing.T) {
	t.Setenv("CORTEXQ_TEST_SECRET", "hunter2")
	sb := newBwrap(t, Limits{})
	out, _, r := sh(t, sb, Spec{}, `id -u; id -g; ls -d /home /root /run /work /var/log /var/lib/dpkg /etc/passwd /etc/shadow /etc/ssh 2>&1; env;
grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status; cat /proc/net/dev; touch /usr/x 2>&1; touch /x 2>&1;
touch /dev/x 2>&1; touch /dev/shm/x 2>&1; echo quiet > /dev/null && echo devnull; echo done`)
	require.Zero(t, r.ExitCode, out)
	lines := strings.Split(out, "\n")
	require.Equal(t, "65534", lines[0], out)
	require.Equal(t, "65534", lines[1], out)
	for _, p := range []string{"/home", "/root", "/run", "/work", "/var/log", "/var/lib/dpkg", "/etc/passwd", "/etc/shadow", "/etc/ssh"} {
		require.Contains(t, out, "ls: cannot access '"+p+"': No such file or directory", out)
	}
	require.NotContains(t, out, "hunter2", "the worker's environment does not reach the sandbox")
	require.Contains(t, out, "CapEff:\t0000000000000000")
	require.Contains(t, out, "CapBnd:\t0000000000000000")
	require.Contains(t, out, "NoNewPrivs:\t1")
	require.Contains(t, out, "lo:")
	require.NotContains(t, out, "eth0:")
	require.Contains(t, out, "touch: cannot touch '/usr/x': Read-only file system")
	require.Contains(t, out, "touch: cannot touch '/x'")
	require.Contains(t, out, "touch: cannot touch '/dev/x'", "/dev is no place to write either")
	require.Contains(t, out, "touch: cannot touch '/dev/shm/x'")
	require.Contains(t, out, "devnull")
	require.Contains(t, out, "done")
}

// Only the regular files of OutDir come back, under OutHost; a link is not followed.
func TestSandboxOutputIsRegularFilesOnly(t *testing.T) {
	sb := newBwrap(t, Limits{})
	host := filepath.Join(reachable(t), "out")
	_, _, r := sh(t, sb, Spec{OutHost: host, Dirs: []string{"sub"}},
		`echo a > /tmp/out/a; echo b > /tmp/out/sub/b; ln -s /etc/ld.so.cache /tmp/out/link; mkfifo /tmp/out/fifo; echo c > /tmp/elsewhere`)
	require.Zero(t, r.ExitCode)
	require.NoError(t, r.OutErr)
	var got []string
	require.NoError(t, filepath.WalkDir(host, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(host, p)
			got = append(got, rel)
		}
		return err
	}))
	require.ElementsMatch(t, []string{"a", "sub/b"}, got)
	b, err := os.ReadFile(filepath.Join(host, "sub", "b"))
	require.NoError(t, err)
	require.Equal(t, "b\n", string(b))
}

// A command past Spec.Timeout is ended, reported, and what it wrote still comes back.
func TestSandboxTimeoutKeepsOutput(t *testing.T) {
	sb := newBwrap(t, Limits{})
	host := filepath.Join(reachable(t), "out")
	start := time.Now()
	_, _, r := sh(t, sb, Spec{OutHost: host, Timeout: time.Second}, `echo partial > /tmp/out/log; trap '' TERM; sleep 60`)
	require.True(t, r.TimedOut, "%+v", r)
	require.Less(t, time.Since(start), 30*time.Second)
	b, err := os.ReadFile(filepath.Join(host, "log"))
	require.NoError(t, err)
	require.Equal(t, "partial\n", string(b))
}

// Where bwrap cannot run, New says so, with its error: the worker then refuses to start.
func TestSandboxProbeFails(t *testing.T) {
	_, err := New(context.Background(), Config{Mode: Bwrap, Bwrap: "/bin/false", ProbeDir: reachable(t)})
	require.ErrorContains(t, err, "cannot run a sandbox here")
	_, err = New(context.Background(), Config{Mode: Bwrap, Bwrap: filepath.Join(reachable(t), "nope")})
	require.ErrorContains(t, err, "apt-get install bubblewrap")
	_, err = New(context.Background(), Config{Mode: Bwrap, ReadOnly: []string{"relative"}})
	require.ErrorContains(t, err, "not absolute")
	sb, err := New(context.Background(), Config{Mode: None})
	require.NoError(t, err)
	require.Equal(t, "none", sb.String())
	_, err = ParseMode("nsjail")
	require.Error(t, err)
}

// The sandbox cannot make user namespaces of its own (bwrap 0.8.0 and later): the kernel's
// namespace code is the usual way up from an unprivileged uid.
func TestSandboxRefusesNestedUserNamespaces(t *testing.T) {
	sb := newBwrap(t, Limits{})
	require.True(t, sb.noUserns, "bwrap 0.8.0 or later (Debian 12's) has --disable-userns")
	out, _, _ := sh(t, sb, Spec{}, `unshare --user true 2>&1; echo status $?`)
	require.NotContains(t, out, "status 0", out)
}
