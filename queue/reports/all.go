package reports

import (
	"context"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// The report's "all tasks" view (CorTeX's all=true, docs/reports.md#all-tasks): the messages of
// a severity in the current runs of every task of a corpus and service, whatever its status —
// the warnings inside Error tasks, the errors inside Fatal ones, the infos everywhere. The fold
// keeps its counts (report_all_rollup, migrations/00019_report_all_rollups.sql) beside those of
// the status report: it is as fresh as the last fold, and as fast.

// AllSeverities are the severities the all-tasks view knows, in the report's order.
var AllSeverities = []queue.Severity{queue.SeverityInfo, queue.SeverityWarning, queue.SeverityError,
	queue.SeverityFatal, queue.SeverityInvalid}

// IsAllSeverity reports whether s is one of AllSeverities.
func IsAllSeverity(s string) bool {
	for _, x := range AllSeverities {
		if string(x) == s {
			return true
		}
	}
	return false
}

// ReportAllSeverities counts, per severity, the tasks with a message of it in their current run
// and those messages, as of the last fold; every one of AllSeverities is in the map.
func (s *Store) ReportAllSeverities(ctx context.Context, scope queue.Scope) (map[queue.Severity]ReportRow, error) {
	rows, err := dbsqlc.New(s.pool).ReportAllSeverities(ctx, scope.CorpusID, scope.ServiceID)
	if err != nil {
		return nil, pgtx.Wrap("report all severities", err)
	}
	out := map[queue.Severity]ReportRow{}
	for _, sev := range AllSeverities {
		out[sev] = ReportRow{Name: string(sev)}
	}
	for _, r := range rows {
		out[queue.Severity(r.Severity)] = ReportRow{Name: r.Severity, Tasks: r.Tasks, Messages: r.Messages}
	}
	return out, nil
}

// ReportAllNames lists a page of the categories of sl.Severity (sl.Category empty) or the whats
// of sl.Category, in the tasks of any status, most tasks first, with the list's length. Status is
// not read.
func (s *Store) ReportAllNames(ctx context.Context, sl Slice) ([]ReportRow, int64, error) {
	var cat *string
	if sl.Category != "" {
		cat = &sl.Category
	}
	rows, err := dbsqlc.New(s.pool).ReportAllNames(ctx, dbsqlc.ReportAllNamesParams{CorpusID: sl.CorpusID,
		ServiceID: sl.ServiceID, Severity: string(sl.Severity), Category: cat, Lim: int32(sl.Limit), Off: int32(sl.Offset)})
	if err != nil {
		return nil, 0, pgtx.Wrap("report all", err)
	}
	out, total := make([]ReportRow, len(rows)), int64(0)
	for i, r := range rows {
		out[i], total = ReportRow{Name: r.Name, Tasks: r.Tasks, Messages: r.Messages}, r.Total
	}
	return out, total, nil
}

// ReportAllMessages lists a page of the messages of a what in the tasks of any status, with
// their tasks and the tasks' statuses, by task id.
func (s *Store) ReportAllMessages(ctx context.Context, sl Slice) ([]ReportMessage, error) {
	rows, err := s.kindMessages(ctx, sl, nil, kindWalkTasks)
	if err != nil {
		return nil, pgtx.Wrap("report all messages", err)
	}
	out := make([]ReportMessage, len(rows))
	for i, r := range rows {
		st := queue.Status(r.Status)
		out[i] = ReportMessage{TaskID: r.ID, Entry: r.Entry, Details: r.Details, Status: &st}
	}
	return out, nil
}

// ReportStatusMessages counts each final status's messages of its own severity, as of the last
// fold.
func (s *Store) ReportStatusMessages(ctx context.Context, scope queue.Scope) (map[queue.Status]int64, error) {
	rows, err := dbsqlc.New(s.pool).ReportStatusMessages(ctx, scope.CorpusID, scope.ServiceID)
	if err != nil {
		return nil, pgtx.Wrap("report messages", err)
	}
	out := map[queue.Status]int64{}
	for _, r := range rows {
		out[queue.Status(r.Status)] += r.Messages
	}
	return out, nil
}
