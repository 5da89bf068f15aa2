package lease

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cortexq/cortexq/queue"
)

// NoMessages is the category under which the report lists the tasks of a severity with no
// message of that severity (a Fatal whose worker said nothing, say).
const NoMessages = "no_messages"

// reportSeverities maps a report's severity name to the task status it selects and the message
// severity it filters (info for no_problem).
var reportSeverities = map[string]struct {
	status  queue.Status
	message queue.Severity
}{
	"no_problem": {queue.StatusNoProblem, queue.SeverityInfo},
	"warning":    {queue.StatusWarning, queue.SeverityWarning},
	"error":      {queue.StatusError, queue.SeverityError},
	"fatal":      {queue.StatusFatal, queue.SeverityFatal},
	"invalid":    {queue.StatusInvalid, queue.SeverityInvalid},
}

// ReportSeverity returns the task status a report severity name (no_problem, warning, error,
// fatal, invalid; any case) selects, and the severity of the messages its levels list.
func ReportSeverity(name string) (queue.Status, queue.Severity, bool) {
	s, ok := reportSeverities[strings.ToLower(name)]
	return s.status, s.message, ok
}

// StatusCount is the tasks of status st in counts (as ReportStatuses returns them); for
// queue.StatusBlocked, those of every blocked value (-6 and below).
func StatusCount(counts map[queue.Status]int64, st queue.Status) int64 {
	if st != queue.StatusBlocked {
		return counts[st]
	}
	var n int64
	for s, k := range counts {
		if s <= queue.StatusBlocked {
			n += k
		}
	}
	return n
}

// ReportSeverityNames lists the report severity names, sorted, comma separated.
func ReportSeverityNames() string {
	names := make([]string, 0, len(reportSeverities))
	for n := range reportSeverities {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// SliceError is a selection that names no slice; its message says why.
type SliceError struct{ msg string }

func (e SliceError) Error() string { return e.msg }

// SelectSlice turns a report slice as operators name it (a severity name, a category, a what;
// each may be empty) into the rerun scope that selects its tasks, without corpus and service:
// what cortexq rerun, sandbox create and the dashboard's buttons select. A severity with the
// category NoMessages selects the tasks of that status with no message of its severity. Bad
// input is a SliceError whose message names the flag-like field (severity, category, what).
func SelectSlice(severity, category, what string) (RerunScope, error) {
	scope := RerunScope{Category: category, What: what}
	if severity == "" {
		if scope.Category == NoMessages {
			return scope, SliceError{fmt.Sprintf("category %s needs a severity", NoMessages)}
		}
		return scope, nil
	}
	status, msg, ok := ReportSeverity(severity)
	if !ok {
		return scope, SliceError{fmt.Sprintf("severity %q: want one of %s", strings.ToLower(severity), ReportSeverityNames())}
	}
	scope.Statuses = []queue.Status{status}
	if scope.Category == NoMessages {
		if scope.What != "" && scope.What != NoMessages {
			return scope, SliceError{fmt.Sprintf("category %s has the one what %s", NoMessages, NoMessages)}
		}
		scope.Category, scope.What, scope.NoMessages = "", "", true
		scope.Severity = string(msg)
		return scope, nil
	}
	if scope.Category != "" || scope.What != "" {
		scope.Severity = string(msg)
	}
	return scope, nil
}

// StatusSeverity is the severity of the messages the report counts for tasks of a final status
// (info for NoProblem; ReportSeverity's), and false for a status that is not final.
func StatusSeverity(st queue.Status) (queue.Severity, bool) {
	for _, s := range reportSeverities {
		if s.status == st {
			return s.message, true
		}
	}
	return "", false
}
