package archive

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// readers are the ways an archive is read: openat2 beneath the corpus path (ReadSource, the
// ventilator's), os.Root (readBeneathRoot, its fallback before openat2), and Open (the
// dashboard's downloads).
var readers = map[string]func(base, path string, buf []byte) ([]byte, error){
	"openat2": ReadSource,
	"root":    readBeneathRoot,
	"open": func(base, path string, _ []byte) ([]byte, error) {
		f, err := Open(base, path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(f)
	},
}

// TestReadBeneath: both readers read a source whole, follow a symbolic link that stays in the
// corpus, and refuse one that leads out of it, a path outside it, a FIFO (without hanging) and
// a directory.
func TestReadBeneath(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(base, "a", "b"), 0o755))
	src := filepath.Join(base, "a", "b", "source.zip")
	want := bytes.Repeat([]byte("cortexq"), 3000)
	require.NoError(t, os.WriteFile(src, want, 0o644))
	require.NoError(t, os.Symlink(filepath.Join("..", "b", "source.zip"), filepath.Join(base, "a", "b", "within.zip")))
	outside := filepath.Join(t.TempDir(), "secret.zip")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(base, "a", "b", "out.zip")))
	require.NoError(t, os.Symlink("../../../"+filepath.Base(filepath.Dir(outside))+"/secret.zip", filepath.Join(base, "a", "b", "up.zip")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(base, "a", "b", "fifo.zip"), 0o644))
	empty := filepath.Join(base, "a", "empty.zip")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))

	for name, read := range readers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, buf := range [][]byte{nil, make([]byte, 0, 5), make([]byte, 0, 1<<20)} {
				got, err := read(base, src, buf)
				require.NoError(t, err)
				require.Equal(t, want, got)
				got, err = read(base, filepath.Join(base, "a", "b", "within.zip"), buf)
				require.NoError(t, err)
				require.Equal(t, want, got)
				got, err = read(base, empty, buf)
				require.NoError(t, err)
				require.Empty(t, got)
			}
			for _, bad := range []string{"out.zip", "up.zip", "fifo.zip", ".", "missing.zip"} {
				_, err := read(base, filepath.Join(base, "a", "b", bad), nil)
				require.Error(t, err, bad)
			}
			_, err := read(base, outside, nil)
			require.ErrorIs(t, err, errOutsideCorpus)
		})
	}
}

// BenchmarkReadSource compares the two readers on 8 KB sources, the bench's, each read in turn
// from 1,000 entry directories into one reused buffer, as the ventilator does.
func BenchmarkReadSource(b *testing.B) {
	base := b.TempDir()
	var paths []string
	for i := range 1000 {
		dir := filepath.Join(base, fmt.Sprintf("%06d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(dir, "source.zip")
		if err := os.WriteFile(p, make([]byte, 8<<10), 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, name := range []string{"root", "openat2"} {
		read := readers[name]
		b.Run(name, func(b *testing.B) {
			buf := make([]byte, 0, 16<<10)
			cpu0 := cpuNanos(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got, err := read(base, paths[i%len(paths)], buf)
				if err != nil || len(got) != 8<<10 {
					b.Fatal(err, len(got))
				}
				buf = got
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuNanos(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuNanos is the CPU time this process has spent (user and system): on a shared machine it
// varies less with the load than the time it took.
func cpuNanos(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
