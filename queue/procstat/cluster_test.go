package procstat

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/queuetest"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// TestClusterPIDsAreOneClustersOnly: the processes counted for a cluster are its postmaster
// (from its data directory's postmaster.pid) and that one's descendants, its backends among
// them, and none of another cluster running beside it, nor this process. Both ways of finding
// children (the kernel's children lists, a /proc scan) agree on that.
func TestClusterPIDsAreOneClustersOnly(t *testing.T) {
	ctx := context.Background()
	locate := func(c *queuetest.Cluster) (string, int, int) {
		pool := c.NewPool(t)
		var dir string
		var backend int
		require.NoError(t, pool.QueryRow(ctx, "SELECT current_setting('data_directory'), pg_backend_pid()").Scan(&dir, &backend))
		pm, err := Postmaster(dir)
		require.NoError(t, err)
		require.Equal(t, pm, Parent(backend), "a backend's parent is the postmaster")
		return dir, pm, backend
	}
	dirA, pmA, backendA := locate(queuetest.NewCluster(t))
	dirB, pmB, backendB := locate(queuetest.NewCluster(t))
	require.NotEqual(t, dirA, dirB)

	pidsA, err := ClusterPIDs(pmA)
	require.NoError(t, err)
	require.Equal(t, pmA, pidsA[0])
	require.Contains(t, pidsA, backendA)
	require.NotContains(t, pidsA, pmB)
	require.NotContains(t, pidsA, backendB)
	require.NotContains(t, pidsA, os.Getpid())
	require.Greater(t, len(pidsA), 2, "a running cluster has auxiliary processes besides the postmaster and one backend")
	for _, pid := range pidsA[1:] {
		if comm := Comm(pid); comm != "" { // "" if it exited meanwhile
			require.Equal(t, "postgres", comm, "pid %d", pid)
			require.Contains(t, pidsA, Parent(pid), "pid %d descends from the postmaster", pid)
		}
	}

	byScan, err := parentsByScan()
	require.NoError(t, err)
	require.Contains(t, byScan[pmA], backendA)
	require.NotContains(t, byScan[pmA], backendB)
	require.True(t, slices.Contains(byScan[pmB], backendB))

	require.Greater(t, Processes(pidsA), 0.0, "a cluster that started and answered has spent CPU")
	require.Greater(t, Runtime(backendA), 0.0, "a backend that answered has run")
	require.Zero(t, Runtime(0), "no process 0 to read")

	_, err = Postmaster(t.TempDir())
	require.Error(t, err, "no postmaster.pid: no cluster")
}
