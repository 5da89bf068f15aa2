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
func (s *upkeep) watchFDs() {
	open, limit, err := openFDs()
	if err != nil {
		return // not Linux, or no /proc: nothing to watch
	}
	s.metrics.fdsOpen.Set(float64(open))
	s.metrics.fdsLimit.Set(float64(limit))
	if trimmed, took := s.trimMemory(open); trimmed {
		s.logger.Debug("freed memory returned to the system after worker connections closed", "open_fds", open, "took", took)
	}
	if float64(open) < fdsLow*float64(limit) {
		return
	}
	if n, emit := s.logLimits.fdsLow.Record(); emit {
		s.logger.Error("file descriptors running low: at the limit new worker connections and /healthz fail; raise the limit (ulimit -n, systemd LimitNOFILE) or look for idle connections",
			"open", open, "limit", limit, "count", n)
	}
}

// raiseFDLimit raises the soft file descriptor limit to the hard one (a worker connection holds
// one descriptor: a fleet needs as many as it has workers, twice for workers that connect both
// sockets here) and reports both. Go raises it at start-up already; this says so in the log
// and holds wherever the process was started from.
func raiseFDLimit() (soft, hard uint64, err error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("file descriptor limit: %w", err)
	}
	if rl.Cur < rl.Max {
		want := unix.Rlimit{Cur: rl.Max, Max: rl.Max}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
			return rl.Cur, rl.Max, fmt.Errorf("raise the file descriptor limit: %w", err)
		}
		rl = want
	}
	return rl.Cur, rl.Max, nil
}

// logFDLimit raises the file descriptor limit and logs what the replica has.
func (s *core) logFDLimit() {
	soft, hard, err := raiseFDLimit()
	if err != nil {
		s.logger.Warn("file descriptor limit not raised", "soft", soft, "hard", hard, "error", err)
		return
	}
	// Each worker holds a connection to the ventilator and one to the sink.
	s.logger.Info("file descriptors", "limit", soft, "hard_limit", hard, "workers_at_most", max(soft, 64)/2-32)
}
