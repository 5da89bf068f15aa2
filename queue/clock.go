package queue

import "time"

// Clock is a test clock standing in for the database clock: every lease-deciding time comes
// from the database (docs/semantics.md), and tests move time by setting this. A nil Clock, or
// one reading the zero time, means the database clock. The composition root (queue/base) holds
// the one Clock that the lease store, inspect and reports read.
type Clock func() time.Time

// Injected is the clock's reading to pass to a query's now parameter: nil for the database
// clock.
func (c Clock) Injected() *time.Time {
	if c == nil {
		return nil
	}
	if t := c(); !t.IsZero() {
		return &t
	}
	return nil
}
