package lease

import (
	"time"

	"github.com/cortexq/cortexq/queue"
)

// Lease is a task leased to a worker: a hand-out as the dispatch side sends it (Reserved.Lease),
// and an attributed one (Attribute), with its LeasedAt and Deadline.
type Lease struct {
	queue.Task
	Attempt  int // 0-based, within the run
	Worker   string
	LeasedAt time.Time
	Deadline time.Time
	// Retry is set for a queued retry of an expired lease.
	Retry bool
	// LastCause is the last retryable cause reported for the task, if any.
	LastCause []queue.Message
}
