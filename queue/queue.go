// Package queue is cortexq's vocabulary: task statuses, log messages, reports and the errors
// shared by every other package. It depends on nothing but the standard library.
package queue

import (
	"errors"
	"fmt"
	"strings"
)

// Status is a task's status as stored in tasks.status.
type Status int16

// The task statuses. Negative values are terminal; 1 means a dispatch row is active.
const (
	StatusTODO       Status = 0
	StatusDispatched Status = 1
	StatusNoProblem  Status = -1
	StatusWarning    Status = -2
	StatusError      Status = -3
	StatusFatal      Status = -4
	StatusInvalid    Status = -5
	StatusBlocked    Status = -6
)

// String reports the status's key, as operators see it in psql and the CLI.
func (s Status) String() string {
	switch {
	case s == StatusTODO:
		return "todo"
	case s == StatusDispatched:
		return "dispatched"
	case s == StatusNoProblem:
		return "no_problem"
	case s == StatusWarning:
		return "warning"
	case s == StatusError:
		return "error"
	case s == StatusFatal:
		return "fatal"
	case s == StatusInvalid:
		return "invalid"
	case s <= StatusBlocked:
		return "blocked"
	default:
		return fmt.Sprintf("status(%d)", int16(s))
	}
}

// Terminal reports whether s is a final verdict (NoProblem … Invalid).
func (s Status) Terminal() bool { return s <= StatusNoProblem && s >= StatusInvalid }

// Failure reports whether s is Fatal or Invalid: a failure never replaces an accepted usable
// result, and any usable result replaces a failure ("good result wins").
func (s Status) Failure() bool { return s == StatusFatal || s == StatusInvalid }

// StatusFromConversion maps the N of a `conversion` status line to a status, clamped to
// NoProblem…Invalid (0 → NoProblem, 1 → Warning, 2 → Error, 3 → Fatal, 4 or more → Invalid,
// negative → NoProblem is never produced: negative N clamps to Fatal as an unreadable verdict).
func StatusFromConversion(n int) Status {
	switch {
	case n < 0:
		return StatusFatal
	case n > 4:
		return StatusInvalid
	default:
		return Status(-(n + 1))
	}
}

// Task names one task of one run and where its work lies: the service that converts it and the
// corpus entry it converts. The lease, reservation, mirror and lookup types embed it.
type Task struct {
	TaskID    int64
	Run       int32
	ServiceID int32
	CorpusID  int32
	Entry     string
}

// Severity is a log message's kind, as stored in task_messages.severity.
type Severity string

// The message severities.
const (
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
	SeverityError   Severity = "error"
	SeverityFatal   Severity = "fatal"
	SeverityInvalid Severity = "invalid"
)

// SeverityOf maps a log line's severity word (any case) to a Severity: warning|warn, error,
// fatal, invalid; anything else is Info.
func SeverityOf(word string) Severity {
	switch strings.ToLower(word) {
	case "warning", "warn":
		return SeverityWarning
	case "error":
		return SeverityError
	case "fatal":
		return SeverityFatal
	case "invalid":
		return SeverityInvalid
	default:
		return SeverityInfo
	}
}

// Message is one line of a task's log as stored in task_messages.
type Message struct {
	Severity Severity `json:"severity"`
	Category string   `json:"category"`
	What     string   `json:"what"`
	Details  string   `json:"details,omitempty"`
}

// Field limits of task_messages, in bytes; longer values are truncated on a character boundary.
const (
	MaxCategoryBytes = 100
	MaxWhatBytes     = 200
	MaxDetailsBytes  = 2000
)

// NeverCompleted is the dead-letter message of a task whose every attempt timed out without a
// retryable cause on record.
var NeverCompleted = Message{Severity: SeverityFatal, Category: "cortex", What: "never_completed_with_retries"}

// Report is what a result archive says about its task: a status and the log messages to keep.
type Report struct {
	Status   Status
	Messages []Message
	// Retryable is set when the log carries `Info:cortex:retryable`: the Fatal is a retryable
	// cause (a timeout, an out-of-memory shed, a crash), not a verdict.
	Retryable bool
	// Stages holds the worker's own stages from its `Info:cortexq:stage_ms` line (StageLine;
	// nil: none), which is not stored as a message.
	Stages *Stages
}

// Errors shared across packages.
var (
	ErrNotFound  = errors.New("not found")
	ErrDuplicate = errors.New("already exists")
)

// MaxDispatchRetries is how many times an expired lease is retried before the task is
// dead-lettered: 1 means three attempts in all.
const MaxDispatchRetries = 1

// Saturated reports whether a replica with inFlight leases must hold back (mock replies) under a
// maximum of max: saturation is inclusive, so the count never passes max.
func Saturated(inFlight, max int) bool { return inFlight >= max }

// Scope names one corpus and one service by id: the unit that is imported, paused, rerun and
// reported on.
type Scope struct {
	CorpusID  int32
	ServiceID int32
}
