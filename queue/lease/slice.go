package lease

import (
	"fmt"
	"strings"

	"github.com/cortexq/cortexq/queue"
)

// SliceError is a selection that names no slice; its message says why.
type SliceError struct{ msg string }

func (e SliceError) Error() string { return e.msg }

// SelectSlice turns a report slice as operators name it (a severity name, a category, a what;
// each may be empty) into the rerun scope that selects its tasks, without corpus and service:
// what cortexq rerun, sandbox create and the dashboard's buttons select. A severity with the
// category queue.NoMessages selects the tasks of that status with no message of its severity. Bad
// input is a SliceError whose message names the flag-like field (severity, category, what).
func SelectSlice(severity, category, what string) (RerunScope, error) {
	scope := RerunScope{Category: category, What: what}
	if severity == "" {
		if scope.Category == queue.NoMessages {
			return scope, SliceError{fmt.Sprintf("category %s needs a severity", queue.NoMessages)}
		}
		return scope, nil
	}
	status, msg, ok := queue.ReportSeverity(severity)
	if !ok {
		return scope, SliceError{fmt.Sprintf("severity %q: want one of %s", strings.ToLower(severity), queue.ReportSeverityNames())}
	}
	scope.Statuses = []queue.Status{status}
	if scope.Category == queue.NoMessages {
		if scope.What != "" && scope.What != queue.NoMessages {
			return scope, SliceError{fmt.Sprintf("category %s has the one what %s", queue.NoMessages, queue.NoMessages)}
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
