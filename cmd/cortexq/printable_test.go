package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
)

func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, ünïcode and a \\ backslash": "plain text, ünïcode and a \\ backslash",
		"\x1b[31mred\x1b[0m":                     `\x1b[31mred\x1b[0m`,
		"tab\there\nnewline\r":                   `tab\there\nnewline\r`,
		"bell\a del\x7f c1\u009b":                `bell\a del\x7f c1\u009b`,
		"bidi \u202eevil":                        `bidi \u202eevil`,
		"bad \xff\xfe utf-8":                     `bad \xff\xfe utf-8`,
		"":                                       "",
	} {
		require.Equal(t, want, printable(in), "%q", in)
	}
}

// TestTablesEscapeControlCharacters prints what workers and psql edits put in the database, and
// checks that no control character reaches the terminal.
func TestTablesEscapeControlCharacters(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 1)...)
	sc := d.scope("c", "echo")
	l := d.lease(sc.ServiceID, "w\x1b[2J")[0]
	require.Equal(t, lease.OutcomeAccepted, d.claim(lease.Result{TaskID: l.TaskID, Worker: l.Worker, Kind: lease.KindReport,
		Status: queue.StatusWarning, Messages: []queue.Message{
			{Severity: queue.SeverityWarning, Category: "latex\a", What: "\x1b[31mred", Details: "from \x1b]0;title\x07 a log"}}}).Outcome)
	_, err := d.pool.Exec(d.ctx, `UPDATE corpora SET name = 'c' || chr(27) || '[5m'`)
	require.NoError(t, err)
	_, err = d.pool.Exec(d.ctx, `UPDATE tasks SET entry = entry || chr(155) || '2J'`)
	require.NoError(t, err)

	for _, args := range [][]string{{"task", "show", fmt.Sprint(l.TaskID)}, {"status"}, {"service", "list"}} {
		out := d.ok(args...)
		require.False(t, strings.ContainsFunc(out, func(r rune) bool {
			return r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0
		}), "cortexq %v printed a control character: %q", args, out)
		if args[0] == "task" {
			for _, want := range []string{`w\x1b[2J`, `latex\a`, `\x1b[31mred`, `from \x1b]0;title\a a log`, `c\x1b[5m`, `t0.zip\u009b2J`} {
				require.Contains(t, out, want)
			}
		}
	}
}
