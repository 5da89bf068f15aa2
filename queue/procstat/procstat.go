// Package procstat reads CPU time and memory from Linux's /proc, for cortexq's benchmarks and
// attack tests: a process's, and the whole machine's.
package procstat

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every Linux cortexq runs on.
const clockTicks = 100

// Machine is the CPU seconds the machine's CPUs have been busy so far (user, nice, system, irq,
// softirq; guest time is inside user), or false where /proc/stat cannot be read. It leaves out
// steal, the time a virtual machine's CPUs were not running at all: on shared machines that
// swings by half the CPU within minutes, and it is no work of anything measured.
func Machine() (float64, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return float64(ticks) / clockTicks, true
}

// Process is a process's user and system CPU seconds, with those of its children it reaped,
// from /proc/<pid>/stat ("self" for this process); 0 where it cannot be read.
func Process(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at state, field 3.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 15 {
		return 0
	}
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime (fields 14–17)
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / clockTicks
}

// Runtime is the CPU seconds a single-threaded process (a PostgreSQL backend, say) has run,
// from /proc/<pid>/schedstat: in nanoseconds, where Process counts clock ticks of 10 ms, too
// coarse for a process that runs a few hundred µs a second. 0 where it cannot be read.
func Runtime(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	ns, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return ns / 1e9
}

// StatusBytes reads a size field of /proc/<pid>/status (VmRSS, VmHWM, ...) in bytes.
func StatusBytes(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
