package lease

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
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
