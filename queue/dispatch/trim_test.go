package dispatch

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTrimMemoryAfterConnectionsClose: the C heap is trimmed once trimAfter descriptors or more
// closed since the most open, and not again until as many more close after a new peak.
func TestTrimMemoryAfterConnectionsClose(t *testing.T) {
	s := &upkeep{}
	for _, step := range []struct {
		open    int
		trimmed bool
	}{
		{100, false}, {10_000, false}, {9_800, false}, {9_744, true}, // 256 closed since the peak
		{9_600, false}, {9_800, false}, {9_544, true}, // a new peak, then 256 below it
		{9_544, false}, {0, true},
	} {
		trimmed, _ := s.trimMemory(step.open)
		require.Equal(t, step.trimmed, trimmed, "open %d", step.open)
	}
}
