package dispatch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkResultArchive compares the two ways a result archive is written and published: a
// temp file renamed into place (temp: writeTemp, anonArchives off) and, where the target does
// not exist yet, an unnamed file linked into place (anon: writeArchiveAs), to a target that
// does not exist yet (new) and over an earlier archive (replace). 8 KB results, as the
// bench's; the claim's syncfs, the same for both, is left out. It reports the CPU per
// operation (cpu-ns/op), which the load of a shared machine moves less than the time.
func BenchmarkResultArchive(b *testing.B) {
	data := [][]byte{make([]byte, 8<<10)}
	for _, mode := range benchModes() {
		for _, target := range []string{"new", "replace"} {
			b.Run(mode+"/"+target, func(b *testing.B) {
				defer anonArchives.Store(anonArchives.Load())
				anonArchives.Store(mode == "anon")
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

// benchModes is the order BenchmarkResultArchive runs its modes in, $CORTEXQ_BENCH_MODES
// ("anon temp") or temp then anon: on ext4 a file created just after thousands were deleted
// costs more, so runs in both orders compare them fairly.
func benchModes() []string {
	if m := strings.Fields(os.Getenv("CORTEXQ_BENCH_MODES")); len(m) > 0 {
		return m
	}
	return []string{"temp", "anon"}
}
