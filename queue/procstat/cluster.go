package procstat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxClusterProcs bounds the processes ClusterPIDs walks: a PostgreSQL cluster has its
// postmaster, a few auxiliary processes and one backend per connection.
const maxClusterProcs = 1 << 16

// Postmaster reads the pid of the postmaster running the cluster in dataDir from its
// postmaster.pid, and checks that the process is there and is PostgreSQL's (named postgres).
func Postmaster(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("postmaster of %s: %w", dataDir, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("postmaster of %s: malformed postmaster.pid", dataDir)
	}
	if comm := Comm(pid); comm != "postgres" && comm != "postmaster" {
		return 0, fmt.Errorf("postmaster of %s: pid %d is not a running postgres (%q)", dataDir, pid, comm)
	}
	return pid, nil
}

// Comm is a process's command name (/proc/<pid>/comm), "" where it cannot be read.
func Comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Parent is a process's parent pid (/proc/<pid>/stat), 0 where it cannot be read.
func Parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1]) // state, then ppid (fields 3 and 4)
	return ppid
}

// ClusterPIDs is the postmaster's pid and its descendants' (backends, auxiliary processes,
// parallel workers): the processes of one PostgreSQL cluster and of no other, whatever else
// on the machine is named postgres. It reads /proc/<pid>/task/*/children where the kernel has
// it, else scans /proc for parent pids.
func ClusterPIDs(postmaster int) ([]int, error) {
	parents, err := parentsByChildren(postmaster)
	if err != nil {
		parents, err = parentsByScan()
		if err != nil {
			return nil, err
		}
	}
	pids := []int{postmaster}
	for i := 0; i < len(pids) && len(pids) < maxClusterProcs; i++ {
		pids = append(pids, parents[pids[i]]...)
	}
	return pids, nil
}

// parentsByChildren reads the children lists of postmaster's tree, as a map from parent to
// children.
func parentsByChildren(postmaster int) (map[int][]int, error) {
	out := map[int][]int{}
	todo := []int{postmaster}
	for len(todo) > 0 && len(out) < maxClusterProcs {
		pid := todo[0]
		todo = todo[1:]
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			if pid == postmaster {
				return nil, err
			}
			continue // exited meanwhile
		}
		out[pid] = nil
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
			if err != nil {
				if pid == postmaster && errors.Is(err, os.ErrNotExist) {
					return nil, err // a kernel without CONFIG_PROC_CHILDREN
				}
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out[pid] = append(out[pid], c)
					todo = append(todo, c)
				}
			}
		}
	}
	return out, nil
}

// parentsByScan reads every process's parent from /proc, as a map from parent to children.
func parentsByScan() (map[int][]int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int][]int{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if ppid := Parent(pid); ppid > 0 {
			out[ppid] = append(out[ppid], pid)
		}
	}
	return out, nil
}

// Processes is the sum of Process over pids.
func Processes(pids []int) float64 {
	var s float64
	for _, p := range pids {
		s += Process(strconv.Itoa(p))
	}
	return s
}
