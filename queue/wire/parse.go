package wire

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrMalformed is what every *FrameError matches with errors.Is.
var ErrMalformed = errors.New("malformed frames")

// The reasons a message is rejected. Each is a short snake_case word, fit for a metrics label.
const (
	ReasonEmptyMessage   = "empty_message"    // no frames at all
	ReasonEmptyIdentity  = "empty_identity"   // a zero-length routing id
	ReasonIdentityOnly   = "identity_only"    // a request without a service frame
	ReasonEmptyService   = "empty_service"    // a zero-length service frame
	ReasonServiceNotUTF8 = "service_not_utf8" // service is not valid UTF-8
	ReasonServiceTooLong = "service_too_long" // service longer than MaxServiceBytes
	ReasonServiceBadChar = "service_bad_char" // a path separator, control char, or "." / ".."
	ReasonTooFewFrames   = "too_few_frames"   // a result with fewer than 4 frames
	ReasonBadTaskID      = "bad_task_id"      // a task id that is not a positive decimal int64
	ReasonTooManyFrames  = "too_many_frames"  // a result within the size cap in more frames than a replica keeps
	ReasonHeaderTooLarge = "header_too_large" // a header frame over MaxHeaderBytes
)

// Reasons lists every Reason a *FrameError can carry, to pre-register metric labels.
var Reasons = []string{
	ReasonEmptyMessage, ReasonEmptyIdentity, ReasonIdentityOnly, ReasonEmptyService,
	ReasonServiceNotUTF8, ReasonServiceTooLong, ReasonServiceBadChar, ReasonTooFewFrames,
	ReasonBadTaskID, ReasonTooManyFrames, ReasonHeaderTooLarge,
}

// Names that stand in for unreadable frames of a result.
const (
	UnknownWorker  = "_worker_"
	UnknownService = "_unknown_"
)

// FrameError reports a message that breaks the protocol. It matches ErrMalformed.
type FrameError struct {
	// Reason is one of the Reason constants.
	Reason string
	// Detail says what was seen, quoted and truncated so it is safe to log.
	Detail string
}

// Error reports the reason and the detail.
func (e *FrameError) Error() string {
	if e.Detail == "" {
		return "malformed frames: " + e.Reason
	}
	return "malformed frames: " + e.Reason + ": " + e.Detail
}

// Is makes a *FrameError match ErrMalformed.
func (e *FrameError) Is(target error) bool { return target == ErrMalformed }

// ReasonOf returns the Reason of a *FrameError in err's chain, or "" if there is none.
func ReasonOf(err error) string {
	var fe *FrameError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return ""
}

// ParseRequest reads a request as a ROUTER receives it: [identity, service, extra…]. Extra
// frames are ignored. The identity is returned as the raw routing bytes (a sub-slice of
// frames[0]) so a reply can be routed to it; the service must pass ValidService.
func ParseRequest(frames [][]byte) (identity []byte, service string, err error) {
	switch {
	case len(frames) == 0:
		return nil, "", &FrameError{Reason: ReasonEmptyMessage}
	case len(frames[0]) == 0:
		return nil, "", &FrameError{Reason: ReasonEmptyIdentity}
	case len(frames) == 1:
		return nil, "", &FrameError{Reason: ReasonIdentityOnly, Detail: "identity " + quote(frames[0], 64)}
	}
	if err := ValidService(frames[1]); err != nil {
		return nil, "", err
	}
	return frames[0], string(frames[1]), nil
}

// ValidService checks a service name: not empty, valid UTF-8, at most MaxServiceBytes, no path
// separator ('/' or '\\'), no control character, and not "." or "..". Service names end up in
// file names (<service>.zip), metrics labels and logs.
func ValidService(name []byte) error {
	switch {
	case len(name) == 0:
		return &FrameError{Reason: ReasonEmptyService}
	case len(name) > MaxServiceBytes:
		return &FrameError{Reason: ReasonServiceTooLong, Detail: strconv.Itoa(len(name)) + " bytes"}
	case !utf8.Valid(name):
		return &FrameError{Reason: ReasonServiceNotUTF8, Detail: quote(name, 64)}
	}
	s := string(name)
	if s == "." || s == ".." {
		return &FrameError{Reason: ReasonServiceBadChar, Detail: strconv.Quote(s)}
	}
	if i := strings.IndexFunc(s, func(r rune) bool {
		return r == '/' || r == '\\' || unicode.IsControl(r)
	}); i >= 0 {
		return &FrameError{Reason: ReasonServiceBadChar, Detail: quote(name, 64)}
	}
	return nil
}

// Result is a worker's result message as the sink receives it.
type Result struct {
	// Identity is the worker's self-declared name, or UnknownWorker if the frame was empty,
	// longer than MaxIdentityBytes, not UTF-8 or held a control character.
	Identity string
	// Service is the service name, or UnknownService if the frame fails ValidService.
	Service string
	// TaskID is the task's id, always positive.
	TaskID int64
	// Data are the archive's frames in order, at least one; they alias the parsed frames.
	Data [][]byte
	// Size is the sum of the data frames' lengths.
	Size int64
}

// ParseResult reads a result message [identity, service, taskid, data…] of at least 4 frames.
// An unreadable identity or service is replaced by a stand-in name (the task id alone decides
// what the result is for); a task id that is not a positive decimal int64 is an error with
// Reason ReasonBadTaskID.
func ParseResult(frames [][]byte) (Result, error) {
	if len(frames) < 4 {
		return Result{}, &FrameError{Reason: ReasonTooFewFrames, Detail: strconv.Itoa(len(frames)) + " frames"}
	}
	id, err := ParseTaskID(frames[2])
	if err != nil {
		return Result{}, err
	}
	r := Result{
		Identity: UnknownWorker,
		Service:  UnknownService,
		TaskID:   id,
		Data:     frames[3:],
	}
	if printable(frames[0], MaxIdentityBytes) {
		r.Identity = string(frames[0])
	}
	if ValidService(frames[1]) == nil {
		r.Service = string(frames[1])
	}
	for _, f := range r.Data {
		r.Size += int64(len(f))
	}
	return r, nil
}

// WorkerName returns a routing identity as a worker name fit for logs and the database: the
// identity itself when it is printable UTF-8 of at most MaxIdentityBytes, else UnknownWorker
// followed by the identity in hex (so anonymous libzmq peers, whose generated ids start with a
// zero byte, stay distinct).
func WorkerName(identity []byte) string {
	if printable(identity, MaxIdentityBytes) {
		return string(identity)
	}
	if len(identity) > MaxIdentityBytes {
		identity = identity[:MaxIdentityBytes]
	}
	return UnknownWorker + hex.EncodeToString(identity)
}

// printable reports whether b is non-empty valid UTF-8 of at most limit bytes without control
// characters (Postgres text refuses NUL; logs should not carry escapes).
func printable(b []byte, limit int) bool {
	if len(b) == 0 || len(b) > limit || !utf8.Valid(b) {
		return false
	}
	return strings.IndexFunc(string(b), unicode.IsControl) < 0
}

// quote returns b as a Go-quoted string of at most limit bytes of input, marking a cut with "…".
func quote(b []byte, limit int) string {
	if len(b) > limit {
		return strconv.Quote(string(b[:limit])) + "…"
	}
	return strconv.Quote(string(b))
}
