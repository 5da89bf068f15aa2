package text_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/text"
)

func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, ünïcode and a \\ backslash":                       "plain text, ünïcode and a \\ backslash",
		"\x1b[31mred\x1b[0m":                                           `\x1b[31mred\x1b[0m`,
		"tab\there\nnewline\r":                                         `tab\there\nnewline\r`,
		"bell\a del\x7f c1\u009b":                                      `bell\a del\x7f c1\u009b`,
		"bidi \u202eevil \u200e\u200f \u2066\u2067\u2068\u2069 \u202a": `bidi \u202eevil \u200e\u200f \u2066\u2067\u2068\u2069 \u202a`,
		"bad \xff\xfe utf-8":                                           `bad \xff\xfe utf-8`,
		"":                                                             "",
	} {
		require.Equal(t, want, text.Printable(in), "%q", in)
	}
	require.Equal(t, "line\tone\nline \\u202etwo\\x00\n", text.PrintableLines("line\tone\nline \u202etwo\x00\n"))
}

func TestCheckInput(t *testing.T) {
	t.Parallel()
	require.NoError(t, text.CheckInput("corpus", "papers ünï"))
	require.EqualError(t, text.CheckInput("corpus", "ab\xff"), "corpus: not UTF-8 text (byte 0xff at byte 2)")
	require.EqualError(t, text.CheckInput("--category", "a\x00b"), "--category: holds a NUL byte (at byte 1): give text without it")
}

func TestCommas(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234", -999: "-999", -100000: "-100,000"} {
		require.Equal(t, want, text.Commas(n), n)
	}
}
