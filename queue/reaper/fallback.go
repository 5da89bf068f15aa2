package reaper

import (
	"context"
	"log/slog"
	"time"

	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
)

// fallbackFactor is how many intervals may pass without any recorded reaper pass before a
// replica reaps on its own.
const fallbackFactor = 3

// Fallback reaps through store, reading the last pass through reads, on this replica whenever no replica has recorded a pass for fallbackFactor
// intervals, until ctx is done. River's leader holds its role for a while after it dies, so
// without this a killed leader leaves expired leases unreaped for tens of seconds; with it the
// gap is bounded by a few intervals. Passes at once are safe (rows are taken with SKIP LOCKED).
func Fallback(ctx context.Context, reads *inspect.Reader, store *lease.Store, interval time.Duration, logger *slog.Logger, onPass func(lease.ReapSummary)) {
	if interval <= 0 {
		interval = IntervalDefault
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "reaper")
	started := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if ran := fallbackOnce(ctx, reads, store, interval, time.Since(started), logger, onPass); ran {
			logger.Warn("no reaper pass recorded lately; this replica reaped in the leader's stead")
		}
	}
}

// fallbackPassTimeout bounds a fallback pass, its check included: on a link gone silent it
// fails rather than waits (docs/operations.md#networks).
const fallbackPassTimeout = time.Minute

// fallbackOnce is Fallback's body: it reaps when the last recorded pass is stale, and reports
// whether it did.
func fallbackOnce(ctx context.Context, reads *inspect.Reader, store *lease.Store, interval, up time.Duration, logger *slog.Logger, onPass func(lease.ReapSummary)) bool {
	ctx, cancel := context.WithTimeout(ctx, fallbackPassTimeout)
	defer cancel()
	stale := fallbackFactor * interval
	age, ok, err := reads.LastReapAge(ctx)
	// A replica that just started gives the leader election its chance first.
	if err != nil || up < stale || (ok && age < stale) {
		return false
	}
	sum, err := store.ReapAll(ctx)
	if err != nil {
		logger.Warn("fallback reap failed", "error", err)
		return false
	}
	if onPass != nil {
		onPass(sum)
	}
	return true
}
