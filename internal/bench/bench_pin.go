package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cortexq/cortexq/queue/procstat"
)

// The bench's --pin: PostgreSQL on one CPU, the replicas and the workers on the others, so that
// the figures are not those of processes competing for the same cores, which they would not
// where the database has a machine of its own (docs/performance.md#replicas-sharing-one-database).

// pinPlan is how --pin splits the CPUs this process may run on: the lowest for PostgreSQL, the
// rest for the replicas and this process (the workers).
type pinPlan struct {
	postgres, rest unix.CPUSet
	pgCPU          int
	restCPUs       []int
	// undo restores the PostgreSQL processes' CPUs as they were.
	saved map[int]unix.CPUSet
}

// planPin splits the CPUs; it needs at least two, and a cluster whose processes are in sight.
func planPin(cluster pgCluster) (*pinPlan, error) {
	if !cluster.counted() {
		return nil, fmt.Errorf("--pin: PostgreSQL's processes are not in sight (%s)", cluster.why)
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, fmt.Errorf("--pin: the CPUs of this process: %w", err)
	}
	p := &pinPlan{pgCPU: -1, saved: map[int]unix.CPUSet{}}
	for cpu := range 1024 {
		if !all.IsSet(cpu) {
			continue
		}
		if p.pgCPU < 0 {
			p.pgCPU = cpu
			p.postgres.Set(cpu)
			continue
		}
		p.rest.Set(cpu)
		p.restCPUs = append(p.restCPUs, cpu)
	}
	if len(p.restCPUs) == 0 {
		return nil, fmt.Errorf("--pin needs at least 2 CPUs; this process may run on %d", all.Count())
	}
	return p, nil
}

// String says what went where.
func (p *pinPlan) String() string {
	return fmt.Sprintf("PostgreSQL on CPU %d, the replicas and the workers on CPUs %v", p.pgCPU, p.restCPUs)
}

// apply pins the cluster's processes (the postmaster too: the backends it starts later inherit
// its CPUs), the replicas and this process, every thread of each.
func (p *pinPlan) apply(cluster pgCluster, replicas []int) error {
	pids, err := procstat.ClusterPIDs(cluster.postmaster)
	if err != nil {
		return fmt.Errorf("--pin: PostgreSQL's processes: %w", err)
	}
	for _, pid := range pids {
		var old unix.CPUSet
		if unix.SchedGetaffinity(pid, &old) == nil {
			p.saved[pid] = old
		}
		if err := pinThreads(pid, p.postgres); err != nil {
			return err
		}
	}
	for _, pid := range append(replicas, os.Getpid()) {
		if err := pinThreads(pid, p.rest); err != nil {
			return err
		}
	}
	runtime.GOMAXPROCS(len(p.restCPUs))
	return nil
}

// undo gives the PostgreSQL processes pinned back their CPUs; one gone meanwhile is skipped.
func (p *pinPlan) undo() {
	for pid, set := range p.saved {
		_ = pinThreads(pid, set)
	}
}

// pinThreads sets the CPUs of every thread of a process.
func pinThreads(pid int, set unix.CPUSet) error {
	tids, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		if os.IsNotExist(err) {
			return nil // gone
		}
		return fmt.Errorf("--pin: threads of %d: %w", pid, err)
	}
	for _, t := range tids {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("--pin: CPUs of %d: %w", tid, err)
		}
	}
	return nil
}
