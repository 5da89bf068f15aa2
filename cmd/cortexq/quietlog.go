package main

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// quietHandler passes records on to h, except that a warning or error whose message was passed
// less than quietWindow ago is counted rather than logged: the next one of that message that is
// logged says how many were left out (repeated=N). A database outage makes River's loops and
// the replica's periodic writes fail every second or so; each is then logged once per window
// (docs/operations.md#networks).
type quietHandler struct {
	h     slog.Handler
	state *quietState
}

// quietWindow is how long a warning or error message is quiet after it was logged.
const quietWindow = 30 * time.Second

type quietState struct {
	mu   sync.Mutex
	last map[string]quietEntry
}

type quietEntry struct {
	at      time.Time
	skipped int
}

// newQuietLogger returns logger, its repeated warnings and errors quieted (quietHandler).
func newQuietLogger(logger *slog.Logger) *slog.Logger {
	return slog.New(quietHandler{h: logger.Handler(), state: &quietState{last: map[string]quietEntry{}}})
}

func (q quietHandler) Enabled(ctx context.Context, l slog.Level) bool { return q.h.Enabled(ctx, l) }

func (q quietHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level < slog.LevelWarn {
		return q.h.Handle(ctx, rec)
	}
	s := q.state
	s.mu.Lock()
	e, seen := s.last[rec.Message]
	if seen && rec.Time.Sub(e.at) < quietWindow {
		e.skipped++
		s.last[rec.Message] = e
		s.mu.Unlock()
		return nil
	}
	if len(s.last) > 1000 { // messages are few; bounded all the same
		clear(s.last)
	}
	s.last[rec.Message] = quietEntry{at: rec.Time}
	s.mu.Unlock()
	if e.skipped > 0 {
		rec = rec.Clone()
		rec.AddAttrs(slog.Int("repeated", e.skipped))
	}
	return q.h.Handle(ctx, rec)
}

func (q quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h: q.h.WithAttrs(as), state: q.state}
}

func (q quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h: q.h.WithGroup(name), state: q.state}
}
