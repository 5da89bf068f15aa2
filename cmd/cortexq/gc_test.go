package main

import (
	"os"
	"runtime/debug"
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
