package main

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGCPercentDefaultsUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "150")
	tuneGC()
	require.Equal(t, 100, debug.SetGCPercent(100), "an operator's GOGC must stand")

	require.NoError(t, os.Unsetenv("GOGC"))
	tuneGC()
	require.Equal(t, gcPercent, debug.SetGCPercent(100))
}

func TestServeMemoryLimitUnlessGOMEMLIMITIsSet(t *testing.T) {
	before := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Setenv("GOMEMLIMIT", "1GiB")
	limitServeMemory()
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "an operator's GOMEMLIMIT must stand")

	require.NoError(t, os.Unsetenv("GOMEMLIMIT"))
	limitServeMemory()
	require.Equal(t, int64(serveMemoryLimit), debug.SetMemoryLimit(-1))
}

// The data-path commands raise GOGC before anything else (here, before refusing their
// arguments); the others, import with its list of entries above all, keep Go's default.
func TestOnlyDataPathCommandsRaiseGOGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(limit) })
	t.Setenv("GOGC", "")
	require.NoError(t, os.Unsetenv("GOGC"))
	home := t.TempDir()
	for _, tc := range []struct {
		args string
		want int
	}{
		{"serve unexpected", gcPercent},
		{"worker echo", gcPercent}, // --service is required
		{"bench --tasks 0", gcPercent},
		{"demo --tasks 0", gcPercent},
		{"import", 100}, // --corpus is required
	} {
		debug.SetGCPercent(100)
		args := append([]string{"cortexq", "--home", home}, strings.Fields(tc.args)...)
		err := newApp().RunContext(context.Background(), args)
		require.Error(t, err, tc.args)
		require.Equal(t, tc.want, debug.SetGCPercent(100), tc.args)
	}
	entries, err := os.ReadDir(home)
	require.NoError(t, err)
	require.Empty(t, entries, "no command got as far as the embedded cluster")
}
