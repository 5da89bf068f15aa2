package dispatch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// cpuNanos is the CPU time this process has spent (user and system): on a shared machine it
// varies less with the load than the time it took.
func cpuNanos(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkResultArchive compares the two ways a result archive is written and published: a
// temp file renamed into place (temp) and an unnamed file linked into place (anon), to a target
// that does not exist yet (new) and over an earlier archive (replace). 8 KB results, as the
// bench's; the claim's syncfs, the same for both, is left out.
func BenchmarkResultArchive(b *testing.B) {
	data := [][]byte{make([]byte, 8<<10)}
	for _, mode := range []string{"temp", "anon"} {
		for _, target := range []string{"new", "replace"} {
			b.Run(mode+"/"+target, func(b *testing.B) {
				defer func(was bool) { anonArchives = was }(anonArchives)
				anonArchives = mode == "anon"
				base := b.TempDir()
				dir := filepath.Join(base, "entry")
				if err := os.Mkdir(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				s := &Server{}
				cpu0 := cpuNanos(b)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					it := &item{target: filepath.Join(dir, "echo.zip")}
					if target == "new" {
						it.target = filepath.Join(dir, fmt.Sprintf("echo-%d.zip", i))
					}
					if err := s.writeArchive(base, it, data); err != nil {
						b.Fatal(err)
					}
					if err := it.publish(); err != nil {
						b.Fatal(err)
					}
					it.cleanup()
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuNanos(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
