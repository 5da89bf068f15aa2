package dispatch

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fdsLow is the share of the file descriptor limit past which the replica warns: each worker
// connection holds one, and at the limit new workers cannot connect and /healthz stops
// answering.
const fdsLow = 0.8

// fdsWatch is how often the replica counts its file descriptors.
const fdsWatch = 2 * time.Second

// openFDs reports how many file descriptors the process has open, and its (soft) limit.
func openFDs() (open, limit int, err error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("file descriptor limit: %w", err)
	}
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, 0, fmt.Errorf("count file descriptors: %w", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return 0, 0, fmt.Errorf("count file descriptors: %w", err)
	}
	return len(names) - 1, int(min(rl.Cur, uint64(1)<<31)), nil // less the one reading them
}

// watchFDs sets the file descriptor gauges and warns, rate-limited, when few are left.
func (s *Server) watchFDs() {
	open, limit, err := openFDs()
	if err != nil {
		return // not Linux, or no /proc: nothing to watch
	}
	s.metrics.fdsOpen.Set(float64(open))
	s.metrics.fdsLimit.Set(float64(limit))
	if float64(open) < fdsLow*float64(limit) {
		return
	}
	if n, emit := s.logLimits.fdsLow.Record(); emit {
		s.logger.Error("file descriptors running low: at the limit new worker connections and /healthz fail; raise the limit (ulimit -n, systemd LimitNOFILE) or look for idle connections",
			"open", open, "limit", limit, "count", n)
	}
}
