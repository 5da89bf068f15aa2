package main

import (
	"os"
	"runtime/debug"
)

// gcPercent is the GOGC the data-path commands (serve, worker, bench, demo) run with when the
// environment sets none; the others, import above all, whose live heap can be large, keep Go's
// default.
//
// A replica's live heap is a few megabytes, but it allocates a fresh buffer for every frame it
// receives (the ZeroMQ binding copies each into a new slice), and so does a worker. At Go's
// default GOGC of 100 the collector runs after every 4 MB or so allocated: a `cortexq bench
// --tasks 3000 --payload-kb 256` (its fleet and replica) collected 1,782 times, against 295
// times with 400. With 400 that bench used 17-27% less machine CPU per task, in runs taken in
// turn with 100. The replica's peak RSS grew from 44 to 58 MB in that bench, and from about 60
// to 85-102 MB with 5,000 tasks of 1 MB in flight.
const gcPercent = 400

// serveMemoryLimit is the soft limit of a replica's Go heap (debug.SetMemoryLimit) unless
// $GOMEMLIMIT is set. At GOGC=400 the heap may grow to five times what is live before a
// collection: under a flood of results with 2,000-byte messages (issue 17), a replica whose
// live heap stayed under 90 MB reached 466 MB of RSS. With the limit the collector runs sooner
// instead (measured: 229 MB at 200 MiB). What is live is bounded by the sink's budgets for
// results received and reports parsed; past the limit the collector runs more often, it does
// not fail.
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
