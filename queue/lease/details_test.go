package lease

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// A run's details travel to the database joined into one text per log (writes.messageParams):
// every detail comes back as it was, whatever bytes it holds, including the separator's.
func TestClaimKeepsEveryDetail(t *testing.T) {
	f := newFixture(t)
	logs := [][]string{
		{"", "x"},
		{"x", ""},
		{"", "", "only the last"},
		{"a\x1e", "\x1fb", "\x1e\x1f", "c\x1e\x1fd", "\x1e1\x1f"},
		{"line one\nline two\n", "tab\tend\x1e", "ünïcödé ∑", "\x1e\x1e\x1f\x1f"},
		{"one"},
		{"", ""}, // every detail empty: stored as NULL, read back as empty
	}
	for i, details := range logs {
		f.task()
		l := f.leaseOne("w" + string(rune('a'+i)))
		msgs := make([]queue.Message, len(details))
		for j, d := range details {
			msgs[j] = queue.Message{Severity: queue.SeverityWarning, Category: "c", What: "w", Details: d}
		}
		d := f.reply(Result{TaskID: l.TaskID, Worker: l.Worker, Kind: KindReport, Status: queue.StatusWarning, Messages: msgs}, nil)
		require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)

		rows, err := f.pool.Query(f.ctx, `SELECT details FROM task_messages WHERE task_id = $1 ORDER BY id`, l.TaskID)
		require.NoError(t, err)
		var got []string
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			got = append(got, s)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, details, got, "log %d", i)
	}
	var nulls int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM task_message_logs WHERE details IS NULL`).Scan(&nulls))
	require.Equal(t, 1, nulls, "the log whose details are all empty stores none")
}

func TestDetailSeparatorAvoidsEveryDetail(t *testing.T) {
	msgs := []queue.Message{{Details: "\x1e\x1f"}, {Details: "x\x1e1\x1fy"}, {Details: "\x1e2"}}
	require.Equal(t, "\x1e2\x1f", detailSeparator(msgs))
	require.Equal(t, "\x1e\x1f", detailSeparator([]queue.Message{{Details: "plain"}}))
}

// A kind keeps the details of its first message as its usual ones, and a log stores NULL for a
// message whose details are those (migrations/00025_usual_details.sql); every reader gives them
// back as they were: the task_messages view, the task page's list, a report's messages of a kind.
func TestClaimElidesUsualDetails(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("x", maxUsualDetailsBytes+1)
	msg := func(what, details string) queue.Message {
		return queue.Message{Severity: queue.SeverityInfo, Category: "loaded_file", What: what, Details: details}
	}
	logs := []struct {
		name  string
		msgs  []queue.Message
		nulls int  // NULL elements stored
		whole bool // details stored as NULL: all empty
	}{
		// The claim adds the kinds it has not seen before its transaction: the first log is
		// elided too. An empty detail where elided is NULL as well (it reads as empty all the
		// same: c has no usual details).
		{"first seen", []queue.Message{
			msg("a", "/p/a"), msg("b", "x"), msg("c", ""), msg("l", long), msg("a", "/p/a")}, 4, false},
		{"usual, other, empty of a kind without usual details", []queue.Message{
			msg("a", "/p/a"), msg("a", "/q/a"), msg("b", "x"), msg("c", ""), msg("c", "y"), msg("l", long)}, 3, false},
		{"every message usual", []queue.Message{msg("a", "/p/a"), msg("b", "x")}, 2, false},
		{"an empty detail of a kind with usual ones: nothing elided", []queue.Message{
			msg("a", ""), msg("a", "/p/a"), msg("b", "x")}, 0, false},
		{"one message: nothing elided", []queue.Message{msg("a", "/p/a")}, 0, false},
		{"all empty", []queue.Message{msg("c", ""), msg("c", "")}, 0, true},
	}
	q := dbsqlc.New(f.pool)
	for i, lg := range logs {
		f.task()
		l := f.leaseOne("w" + string(rune('a'+i)))
		d := f.reply(Result{TaskID: l.TaskID, Worker: l.Worker, Kind: KindReport, Status: queue.StatusNoProblem, Messages: lg.msgs}, nil)
		require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)

		var want []string
		for _, m := range lg.msgs {
			want = append(want, m.Details)
		}
		rows, err := f.pool.Query(f.ctx, `SELECT details FROM task_messages WHERE task_id = $1 ORDER BY id`, l.TaskID)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, want, got, "%s: the view", lg.name)

		listed, err := q.MessageListForTask(f.ctx, nil, l.TaskID)
		require.NoError(t, err)
		got = got[:0]
		for _, m := range listed {
			got = append(got, m.Details)
		}
		require.Equal(t, want, got, "%s: the task page", lg.name)

		var nulls int
		var whole bool
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT coalesce(cardinality(array_positions(details, NULL)), 0), details IS NULL
			FROM task_message_logs WHERE task_id = $1`, l.TaskID).Scan(&nulls, &whole))
		require.Equal(t, lg.nulls, nulls, "%s: NULL elements", lg.name)
		require.Equal(t, lg.whole, whole, "%s: details NULL", lg.name)
	}

	var usual []string
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT array_agg(what || '=' || coalesce(usual_details, 'NULL') ORDER BY what)
		FROM message_kinds WHERE category = 'loaded_file'`).Scan(&usual))
	require.Equal(t, []string{"a=/p/a", "b=x", "c=NULL", "l=NULL"}, usual)

	// A report's page of the messages of kind a, of every task: as sent.
	var kindA int32
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT id FROM message_kinds WHERE what = 'a'`).Scan(&kindA))
	var tasks []int64
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT array_agg(id ORDER BY id) FROM tasks`).Scan(&tasks))
	skips, takes := make([]int32, len(tasks)), make([]int32, len(tasks))
	for i := range takes {
		takes[i] = 10
	}
	page, err := q.ReportKindMessages(f.ctx, dbsqlc.ReportKindMessagesParams{TaskIds: tasks, Skips: skips, Takes: takes, Kind: kindA})
	require.NoError(t, err)
	var got []string
	for _, m := range page {
		got = append(got, m.Details)
	}
	require.Equal(t, []string{"/p/a", "/p/a", "/p/a", "/q/a", "/p/a", "", "/p/a", "/p/a"}, got)
}

// One claim of several results whose logs share kinds, some new to the database, some already
// known: each log is written with its own messages' kinds, in order (Store.resultKinds resolves
// them once, before the transaction).
func TestClaimBatchWritesEachLogsKinds(t *testing.T) {
	f := newFixture(t)
	known := queue.Message{Severity: queue.SeverityInfo, Category: "loaded_file", What: "known", Details: "/k"}
	f.task()
	l := f.leaseOne("w0")
	require.Equal(t, OutcomeAccepted, f.reply(Result{TaskID: l.TaskID, Worker: l.Worker, Kind: KindReport,
		Status: queue.StatusNoProblem, Messages: []queue.Message{known}}, nil).Outcome)

	logs := [][]queue.Message{
		{known, {Severity: queue.SeverityWarning, Category: "undefined", What: "\\x", Details: "at 1"}, known},
		{{Severity: queue.SeverityError, Category: "expected", What: "\\end", Details: "at 2"}, known,
			{Severity: queue.SeverityWarning, Category: "undefined", What: "\\x", Details: "at 3"}},
		{{Severity: queue.SeverityWarning, Category: "undefined", What: "\\y"}},
	}
	for range logs {
		f.task()
	}
	leases := f.lease("wa", "wb", "wc")
	require.Len(t, leases, len(logs))
	results := make([]Result, len(logs))
	for i, l := range leases {
		results[i] = Result{TaskID: l.TaskID, Worker: l.Worker, Kind: KindReport, Status: queue.StatusWarning, Messages: logs[i]}
	}
	ds, err := f.store.Claim(f.ctx, results, nil)
	require.NoError(t, err)
	for i, d := range ds {
		require.Equal(t, OutcomeAccepted, d.Outcome, d.Reason)
		rows, err := f.pool.Query(f.ctx, `SELECT severity, category::text, what::text, details::text
			FROM task_messages WHERE task_id = $1 ORDER BY id`, leases[i].TaskID)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (queue.Message, error) {
			var m queue.Message
			err := row.Scan(&m.Severity, &m.Category, &m.What, &m.Details)
			return m, err
		})
		require.NoError(t, err)
		require.Equal(t, logs[i], got, "log %d", i)
	}
}
