package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"
)

// clockSkewFlag is serve's hidden --clock-skew, for fault tests: the replica behaves as if its
// clock were off by the given offset. Every decision about a lease is made by the database's
// now(), and the replica's own code reads its clock only for durations (monotonic readings, which
// an offset does not change), so the readings the offset moves are the ones a wrong system clock
// would move: the timestamps of its log lines and River's clock (the periodic reap job's schedule,
// its rescuer's horizon), which queue/reaper corrects to the database clock.
func clockSkewFlag() cli.Flag {
	return &cli.DurationFlag{
		Name:    "clock-skew",
		Usage:   "testing: act as if the local clock were off by this much (e.g. 1h, -1h)",
		Hidden:  true,
		EnvVars: envVars("CLOCK_SKEW"),
	}
}

// skewedClock returns the local clock moved by skew, or nil (the real clock) for no skew.
func skewedClock(skew time.Duration) func() time.Time {
	if skew == 0 {
		return nil
	}
	return func() time.Time { return time.Now().Add(skew) }
}

// skewedHandler stamps log records with the skewed clock.
type skewedHandler struct {
	slog.Handler
	skew time.Duration
}

func (h skewedHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Time = r.Time.Add(h.skew)
	return h.Handler.Handle(ctx, r)
}

func (h skewedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return skewedHandler{h.Handler.WithAttrs(attrs), h.skew}
}

func (h skewedHandler) WithGroup(name string) slog.Handler {
	return skewedHandler{h.Handler.WithGroup(name), h.skew}
}
