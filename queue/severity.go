package queue

import (
	"sort"
	"strings"
)

// The report's vocabulary, shared by the report's queries (queue/reports), the slices a rerun
// or a sandbox selects (lease.SelectSlice) and the CLI and dashboard that name them. The SQL
// function status_severity (migrations/00017_status_severity.sql) mirrors reportSeverities; a
// test in queue/reports checks that they agree.

// NoMessages is the category under which the report lists the tasks of a severity with no
// message of that severity (a Fatal whose worker said nothing, say).
const NoMessages = "no_messages"

// reportSeverities maps a report's severity name to the task status it selects and the message
// severity it filters (info for no_problem).
var reportSeverities = map[string]struct {
	status  Status
	message Severity
}{
	"no_problem": {StatusNoProblem, SeverityInfo},
	"warning":    {StatusWarning, SeverityWarning},
	"error":      {StatusError, SeverityError},
	"fatal":      {StatusFatal, SeverityFatal},
	"invalid":    {StatusInvalid, SeverityInvalid},
}

// ReportSeverity returns the task status a report severity name (no_problem, warning, error,
// fatal, invalid; any case) selects, and the severity of the messages its levels list.
func ReportSeverity(name string) (Status, Severity, bool) {
	s, ok := reportSeverities[strings.ToLower(name)]
	return s.status, s.message, ok
}

// StatusCount is the tasks of status st in counts (as ReportStatuses returns them); for
// StatusBlocked, those of every blocked value (-6 and below).
func StatusCount(counts map[Status]int64, st Status) int64 {
	if st != StatusBlocked {
		return counts[st]
	}
	var n int64
	for s, k := range counts {
		if s <= StatusBlocked {
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

// StatusSeverity is the severity of the messages the report counts for tasks of a final status
// (info for NoProblem; ReportSeverity's), and false for a status that is not final.
func StatusSeverity(st Status) (Severity, bool) {
	for _, s := range reportSeverities {
		if s.status == st {
			return s.message, true
		}
	}
	return "", false
}
