package dispatch

/*
#include <malloc.h>
*/
import "C"

import "time"

// trimAfter is how many worker connections (file descriptors) must have closed since the most
// the replica had open before it hands the memory they held back to the system (trimMemory).
const trimAfter = 256

// trimMemory returns the C heap's free memory to the system once trimAfter connections or
// more closed since the last peak of open file descriptors, and reports whether it did and how
// long it took. libzmq allocates its connections' memory on its I/O threads' malloc arenas, and
// glibc's free keeps most of it when a connection goes, so a fleet that churned would keep the
// RSS of its largest size (measured in docs/performance.md#ten-thousand-identities-a-million-distinct;
// see docs/operations.md#fleet-size).
func (s *upkeep) trimMemory(open int) (bool, time.Duration) {
	s.trimMu.Lock()
	defer s.trimMu.Unlock()
	if open > s.fdsPeak {
		s.fdsPeak = open
	}
	if open > s.fdsPeak-trimAfter {
		return false, 0
	}
	s.fdsPeak = open
	start := time.Now()
	C.malloc_trim(0)
	return true, time.Since(start)
}
