// Package wire holds the pure parts of the CorTeX worker protocol that the dispatcher and the
// worker library share: default ports and sizes, frame parsing and validation, task-id frames,
// the mock reply, payload chunking and a rate limiter for discard logs. It does no I/O of its
// own and imports no ZeroMQ binding.
//
// The frames, as a worker sees them:
//
//	request  (DEALER → ROUTER): [service]            the ROUTER reads [identity, service]
//	task     (ROUTER → DEALER): [taskid, chunk…]     chunks of MessageSize, the last one shorter or empty
//	no work  (ROUTER → DEALER): ["0", ""]            MockReply
//	result   (PUSH → PULL):     [identity, service, taskid, data…], at least one data frame
package wire

import (
	"strconv"
)

// Protocol defaults, as deployed CorTeX workers expect them.
const (
	// DefaultVentilatorPort is the ventilator's (ROUTER) TCP port.
	DefaultVentilatorPort = 51695
	// DefaultSinkPort is the sink's (PULL) TCP port.
	DefaultSinkPort = 51696
	// MessageSize is the default payload chunk size in bytes, both directions.
	MessageSize = 100000
	// MockTaskID is the task-id frame of a "no work" reply.
	MockTaskID = "0"
	// LegacyMockTaskID is a second "no work" task id that some workers also accept; cortexq
	// never sends it.
	LegacyMockTaskID = "-1"
)

// Field limits of request and result frames, in bytes.
const (
	// MaxServiceBytes bounds a service name.
	MaxServiceBytes = 200
	// MaxIdentityBytes bounds a worker identity: a ZeroMQ routing id is at most 255 bytes.
	MaxIdentityBytes = 255
	// MaxHeaderBytes bounds each header frame of a message (a result's identity, service and
	// task id; a request's service) as received: a larger one is not even copied, and the
	// message is dropped (ReasonHeaderTooLarge).
	MaxHeaderBytes = 512
	// maxTaskIDDigits is the length of the largest int64, 9223372036854775807.
	maxTaskIDDigits = 19
)

// FormatTaskID returns the task-id frame of id: its decimal ASCII form, no padding.
func FormatTaskID(id int64) []byte {
	return strconv.AppendInt(make([]byte, 0, maxTaskIDDigits+1), id, 10)
}

// ParseTaskID reads a task-id frame of a real task: a positive decimal int64 in canonical form
// (ASCII digits only, no sign, no leading zero, no spaces). Anything else — including the mock
// ids "0" and "-1" — is a *FrameError with Reason ReasonBadTaskID.
func ParseTaskID(frame []byte) (int64, error) {
	if len(frame) == 0 || len(frame) > maxTaskIDDigits || frame[0] == '0' {
		return 0, badTaskID(frame)
	}
	for _, c := range frame {
		if c < '0' || c > '9' {
			return 0, badTaskID(frame)
		}
	}
	id, err := strconv.ParseInt(string(frame), 10, 64)
	if err != nil { // only overflow is left
		return 0, badTaskID(frame)
	}
	return id, nil
}

func badTaskID(frame []byte) error {
	return &FrameError{Reason: ReasonBadTaskID, Detail: "task id " + quote(frame, 24)}
}

// IsMock reports whether a task-id frame means "no work": "0", or the legacy "-1".
func IsMock(taskID []byte) bool {
	s := string(taskID)
	return s == MockTaskID || s == LegacyMockTaskID
}
