//go:build cortexq_testknobs

package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"
)

// This file is compiled only into the test binary the CLI tests build (go build -tags
// cortexq_testknobs); the production binary has no --clock-skew.

// clockSkewFlags is serve's hidden --clock-skew, for fault tests: the replica behaves as if its
// clock were off by the given offset. Every decision about a lease is made by the database's
// now(), and the replica's own code reads its clock only for durations (monotonic readings, which
// an offset does not change), so the readings the offset moves are the ones a wrong system clock
// would move: the timestamps of its log lines and River's clock (the periodic reap job's schedule,
// its rescuer's horizon), which queue/reaper corrects to the database clock.
func clockSkewFlags() []cli.Flag {
	return []cli.Flag{&cli.DurationFlag{
		Name:    "clock-skew",
		Usage:   "testing: act as if the local clock were off by this much (e.g. 1h, -1h)",
		Hidden:  true,
		EnvVars: envVars("CLOCK_SKEW"),
	}}
}

// clockSkew applies serve's --clock-skew: log lines are stamped with the skewed clock, and the
// returned clock (nil for no skew: the real one) is River's.
func clockSkew(c *cli.Context) func() time.Time {
	skew := c.Duration("clock-skew")
	if skew == 0 {
		return nil
	}
	slog.SetDefault(slog.New(skewedHandler{slog.Default().Handler(), skew}))
	slog.Default().With("replica", c.String("replica")).Warn("testing: local clock readings moved by --clock-skew", "clock_skew", skew)
	return skewedClock(skew)
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
