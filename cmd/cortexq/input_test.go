package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNonTextFlagsAreRefusedInOneLine gives flags and arguments bytes that are not UTF-8, or a
// NUL's stand-in (argv cannot hold one), and gets one line naming the flag, never the
// database's error; and a sandbox name with a bidirectional override is printed escaped.
func TestNonTextFlagsAreRefusedInOneLine(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	d.importList("c", "echo", entries("t", 2)...)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"runs", "--corpus", "\xff", "--service", "echo"}, "--corpus: not UTF-8 text (byte 0xff at byte 0)"},
		{[]string{"report", "--corpus", "c", "--service", "echo", "--severity", "error", "--category", "a\xffb"}, "--category: not UTF-8 text (byte 0xff at byte 1)"},
		{[]string{"rerun", "--corpus", "c", "--service", "echo", "--severity", "error", "--category", "x", "--what", "\xc3"}, "--what: not UTF-8 text"},
		{[]string{"sandbox", "create", "\xfe", "--from", "c", "--service", "echo"}, "argument: not UTF-8 text (byte 0xfe at byte 0)"},
	} {
		r := cortexq(t, d.env, tc.args...)
		require.NotEqual(t, 0, r.code, "%q", tc.args)
		require.Contains(t, r.stderr, tc.says, "%q", tc.args)
		require.NotContains(t, r.stderr, "SQLSTATE", "%q", tc.args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, "one line: %q", r.stderr)
	}
	out := d.ok("sandbox", "create", "sb\u202eevil", "--from", "c", "--service", "echo")
	require.Contains(t, out, `sandbox sb\u202eevil (corpus id`)
	require.NotContains(t, out, "\u202e")
}
