package api

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
)

// ParamError is a request's parameter that is wrong: the API answers 422, the CLI a usage error.
type ParamError struct{ Msg string }

func (e ParamError) Error() string { return e.Msg }

// Paramf is a ParamError.
func Paramf(format string, args ...any) error { return ParamError{fmt.Sprintf(format, args...)} }

// IsParam reports whether err is a ParamError.
func IsParam(err error) bool {
	var p ParamError
	return errors.As(err, &p)
}

// ReportQuery names a rung of the report ladder: nothing (the severities), a severity (its
// categories), a category (its whats), a what (its tasks); All reads the all-tasks view
// (docs/reports.md#all-tasks).
type ReportQuery struct {
	Corpus, Service string
	Scope           queue.Scope
	Severity        string
	Category, What  string
	All             bool
	Limit, Offset   int
}

// Check checks the query's names and page: a ParamError says what is wrong.
func (q *ReportQuery) Check() error {
	q.Severity = strings.ToLower(q.Severity)
	switch {
	case q.Limit < 1 || q.Limit > reports.ReportMaxLimit:
		return Paramf("limit %d: want 1 to %d", q.Limit, reports.ReportMaxLimit)
	case q.Offset < 0 || q.Offset > reports.ReportMaxOffset:
		return Paramf("offset %d: want 0 to %d", q.Offset, reports.ReportMaxOffset)
	case q.Category != "" && q.Severity == "":
		return Paramf("category needs a severity")
	case q.What != "" && q.Category == "":
		return Paramf("what needs a category")
	}
	if q.Severity == string(queue.SeverityInfo) {
		q.All = true // infos are only counted in every task
	}
	if q.All {
		if q.Severity != "" && !reports.IsAllSeverity(q.Severity) {
			return Paramf("severity %q: with all, want one of info, warning, error, fatal, invalid", q.Severity)
		}
		return nil
	}
	if _, err := lease.SelectSlice(q.Severity, q.Category, q.What); err != nil {
		return ParamError{err.Error()}
	}
	return nil
}

// reportStatuses are the first rung's rows by status, in order (as cortexq report).
var reportStatuses = []queue.Status{queue.StatusNoProblem, queue.StatusWarning, queue.StatusError,
	queue.StatusFatal, queue.StatusInvalid, queue.StatusTODO, queue.StatusDispatched, queue.StatusBlocked}

func share(n, of int64) float64 {
	if of <= 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// ReadSeverities reads the first rung: the tasks by status with their messages of the status's
// severity, or (All) the messages by severity in every task.
func ReadSeverities(ctx context.Context, st *reports.Store, q ReportQuery) (ReportSeverities, error) {
	counts, err := st.ReportStatuses(ctx, q.Scope)
	if err != nil {
		return ReportSeverities{}, err
	}
	out := ReportSeverities{Corpus: q.Corpus, Service: q.Service, All: q.All, Rows: []ReportRow{}, Rerun: q.RerunCommand()}
	for _, n := range counts {
		out.Tasks += n
	}
	if q.All {
		out.Of = out.Tasks
		sevs, err := st.ReportAllSeverities(ctx, q.Scope)
		if err != nil {
			return out, err
		}
		for _, sev := range reports.AllSeverities {
			r := sevs[sev]
			out.Rows = append(out.Rows, ReportRow{Name: string(sev), Tasks: r.Tasks, Messages: r.Messages, Share: share(r.Tasks, out.Of)})
		}
		return out, nil
	}
	out.Of = out.Tasks - counts[queue.StatusInvalid]
	msgs, err := st.ReportStatusMessages(ctx, q.Scope)
	if err != nil {
		return out, err
	}
	for _, s := range reportStatuses {
		n := queue.StatusCount(counts, s)
		row := ReportRow{Name: StatusName(s), Tasks: n, Messages: msgs[s], Share: share(n, out.Of)}
		if s == queue.StatusInvalid {
			row.Share = 0
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// slice is the reports.Slice of a query, and the tasks its shares are of.
func (q ReportQuery) slice(ctx context.Context, st *reports.Store) (reports.Slice, int64, error) {
	counts, err := st.ReportStatuses(ctx, q.Scope)
	if err != nil {
		return reports.Slice{}, 0, err
	}
	sl := reports.Slice{Scope: q.Scope, Category: q.Category, What: q.What, Limit: q.Limit, Offset: q.Offset}
	if q.All {
		sl.Severity = queue.Severity(q.Severity)
		var of int64
		for _, n := range counts {
			of += n
		}
		return sl, of, nil
	}
	sl.Status, sl.Severity, _ = queue.ReportSeverity(q.Severity)
	return sl, counts[sl.Status], nil
}

// ReadNames reads the second or third rung: a severity's categories or a category's whats.
func ReadNames(ctx context.Context, st *reports.Store, q ReportQuery) (ReportNames, error) {
	sl, of, err := q.slice(ctx, st)
	if err != nil {
		return ReportNames{}, err
	}
	out := ReportNames{Corpus: q.Corpus, Service: q.Service, Severity: q.Severity, Category: q.Category, All: q.All,
		Level: "category", Of: of, Offset: q.Offset, Limit: q.Limit, Rows: []ReportRow{}, Rerun: q.RerunCommand()}
	if q.Category != "" {
		out.Level = "what"
	}
	var rows []reports.ReportRow
	switch {
	case q.All:
		rows, out.Count, err = st.ReportAllNames(ctx, sl)
	case q.Category == "":
		rows, out.Count, err = st.ReportCategories(ctx, sl)
	default:
		rows, out.Count, err = st.ReportWhats(ctx, sl)
	}
	if err != nil {
		return out, err
	}
	if !q.All {
		fold, err := st.ReportFoldState(ctx)
		if err != nil {
			return out, err
		}
		out.Fold = NewFold(fold)
	}
	for _, r := range rows {
		out.Rows = append(out.Rows, ReportRow{Name: r.Name, Tasks: r.Tasks, Messages: r.Messages, Share: share(r.Tasks, of)})
	}
	out.NextOffset = next(q.Offset, q.Limit, len(rows), out.Count)
	return out, nil
}

// ReadTasks reads the last rung: a what's messages with their tasks, their details clipped
// within a list's budget (Budget).
func ReadTasks(ctx context.Context, st *reports.Store, q ReportQuery) (ReportTasks, error) {
	sl, _, err := q.slice(ctx, st)
	if err != nil {
		return ReportTasks{}, err
	}
	out := ReportTasks{Corpus: q.Corpus, Service: q.Service, Severity: q.Severity, Category: q.Category, What: q.What,
		All: q.All, Offset: q.Offset, Limit: q.Limit, Tasks: []ReportTask{}, Rerun: q.RerunCommand()}
	read := st.ReportMessages
	if q.All {
		read = st.ReportAllMessages
	}
	msgs, err := read(ctx, sl)
	if err != nil {
		return out, err
	}
	b := NewBudget()
	for _, m := range msgs {
		t := ReportTask{TaskID: m.TaskID, Entry: m.Entry, Details: b.Clip(m.Details), DetailsBytes: len(m.Details), Task: TaskPath(m.TaskID)}
		if m.Status != nil {
			t.Status = StatusName(*m.Status)
		}
		out.Tasks = append(out.Tasks, t)
	}
	out.NextOffset = next(q.Offset, q.Limit, len(msgs), -1)
	return out, nil
}

// RerunCommand is the cortexq command that reruns the query's slice.
func (q ReportQuery) RerunCommand() string {
	parts := []string{"cortexq", "rerun"}
	for _, kv := range [][2]string{{"corpus", q.Corpus}, {"service", q.Service}, {"severity", q.Severity}, {"category", q.Category}, {"what", q.What}} {
		if kv[1] != "" {
			parts = append(parts, "--"+kv[0], shellQuote(kv[1]))
		}
	}
	if q.All {
		parts = append(parts, "--all")
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.,/:=+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
