package main

import (
	"os"
	"runtime/debug"
)

// gcPercent is the GOGC the data-path commands (serve, worker, bench, demo) run with when the
// environment sets none: their live heap is small but they allocate a buffer per frame, so
// fewer collections save CPU for a little memory. The others (import above all) keep Go's
// default. See docs/performance.md#gogc.
const gcPercent = 400

// serveMemoryLimit is the soft limit of a replica's Go heap (debug.SetMemoryLimit) unless
// $GOMEMLIMIT is set, so that GOGC=400 does not let the heap grow to five times what is live
// under a flood of results. See docs/performance.md#memory-limit.
const serveMemoryLimit = 192 << 20

// limitServeMemory sets the heap's soft limit to serveMemoryLimit unless $GOMEMLIMIT is set.
func limitServeMemory() {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(serveMemoryLimit)
	}
}

// tuneGC sets the collector to gcPercent unless $GOGC is set.
func tuneGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(gcPercent)
	}
}
