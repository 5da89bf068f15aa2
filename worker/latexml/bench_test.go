package latexml

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/worker/sandbox"
)

// BenchmarkSandboxCost converts the sample papers (those LaTeXML runs on) sandboxed (bwrap, the
// default limits) and unsandboxed (--sandbox=none) in turn, the order swapped every round, and
// reports the medians of one conversion in each mode and of the paired differences:
//
//	go test ./worker/latexml -run '^$' -bench SandboxCost -benchtime 5x
func BenchmarkSandboxCost(b *testing.B) {
	if _, err := os.Stat("/usr/bin/latexmlc"); err != nil {
		b.Skip("latexmlc not installed")
	}
	sb := newSandbox(b, sandbox.Limits{})
	modes := []*Converter{New(Config{Logger: discard(), Sandbox: sandbox.Unconfined()}), New(Config{Logger: discard(), Sandbox: sb})}
	var srcs []string
	for _, s := range Samples {
		if s.Want == queue.StatusInvalid {
			continue
		}
		data, err := s.Zip()
		require.NoError(b, err)
		p := filepath.Join(b.TempDir(), s.Name+".zip")
		require.NoError(b, os.WriteFile(p, data, 0o644))
		srcs = append(srcs, p)
	}
	base := scratchDir(b)
	convert := func(c *Converter, src string) time.Duration {
		dir, err := os.MkdirTemp(base, "cortex_task*")
		require.NoError(b, err)
		defer os.RemoveAll(dir)
		start := time.Now()
		require.NoError(b, c.Convert(context.Background(), src, filepath.Join(dir, "result.zip")))
		return time.Since(start)
	}
	var none, bwrap, added []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, src := range srcs {
			var d [2]time.Duration
			for k := range 2 {
				m := (i + j + k) % 2 // the order swaps every pair
				d[m] = convert(modes[m], src)
			}
			none = append(none, ms(d[0]))
			bwrap = append(bwrap, ms(d[1]))
			added = append(added, ms(d[1]-d[0]))
		}
	}
	b.ReportMetric(median(none), "none-ms/conv")
	b.ReportMetric(median(bwrap), "bwrap-ms/conv")
	b.ReportMetric(median(added), "added-ms/conv")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSandboxStart runs /bin/true in the sandbox and unsandboxed, in turn: the sandbox's
// fixed cost per command, without latexmlc's noise.
func BenchmarkSandboxStart(b *testing.B) {
	sb := newSandbox(b, sandbox.Limits{})
	out := scratchDir(b)
	var none, bwrap []float64
	for i := 0; i < b.N; i++ {
		for _, s := range []*sandbox.Sandbox{sandbox.Unconfined(), sb} {
			start := time.Now()
			r := s.Run(context.Background(), sandbox.Spec{Argv: []string{"/bin/true"}, OutHost: out})
			require.NoError(b, r.Err)
			require.Zero(b, r.ExitCode)
			if s == sb {
				bwrap = append(bwrap, ms(time.Since(start)))
			} else {
				none = append(none, ms(time.Since(start)))
			}
		}
	}
	b.ReportMetric(median(none), "none-ms/cmd")
	b.ReportMetric(median(bwrap), "bwrap-ms/cmd")
	b.ReportMetric(0, "ns/op")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
