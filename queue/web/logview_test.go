package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func farDeadline() *deadline { return &deadline{at: time.Now().Add(time.Hour)} }

// TestReadLogShowsItsHeadAndTail: a log of 1,000 lines shows its first 500 and its last 20 with
// their numbers, the lines between counted; a long line is cut with its length noted, a
// character never split; line ends (\n, \r\n, none at the end) are dropped; control characters
// shown escaped.
func TestReadLogShowsItsHeadAndTail(t *testing.T) {
	var b strings.Builder
	for n := 1; n <= 1000; n++ {
		switch n {
		case 3:
			b.WriteString(strings.Repeat("é", 3000) + "\n") // 6,000 bytes
		case 4:
			b.WriteString("crlf\x1b[31m\r\n")
		case 1000:
			b.WriteString("Status:conversion:0") // no line end
		default:
			fmt.Fprintf(&b, "Info:x:y line %d\n", n)
		}
	}
	var v logView
	readLog(strings.NewReader(b.String()), farDeadline(), &v)
	require.EqualValues(t, 1000, v.Lines)
	require.EqualValues(t, b.Len(), v.Read)
	require.False(t, v.Partial || v.Late)
	require.Len(t, v.Head, logHeadLines)
	require.Len(t, v.Tail, logTailLines)
	require.EqualValues(t, 1000-logHeadLines-logTailLines, v.Hidden)
	require.Equal(t, logLine{N: 1, Text: "Info:x:y line 1"}, v.Head[0])
	require.Equal(t, logLine{N: 500, Text: "Info:x:y line 500"}, v.Head[499])
	require.Equal(t, logLine{N: 981, Text: "Info:x:y line 981"}, v.Tail[0])
	require.Equal(t, logLine{N: 1000, Text: "Status:conversion:0"}, v.Tail[19])
	require.EqualValues(t, 501, v.HiddenFrom())
	require.EqualValues(t, 980, v.HiddenTo())
	require.Equal(t, `crlf\x1b[31m`, v.Head[3].Text)
	long := v.Head[2].Text
	require.True(t, strings.HasPrefix(long, strings.Repeat("é", 1024)), "as many whole characters as fit in 2,048 bytes")
	require.True(t, strings.HasSuffix(long, "é … [cut: 6,000 bytes in all]"), long[len(long)-40:])
	require.Equal(t, 1, v.CutLines)
}

// TestReadLogOfHostileLines: the hostile log's lines of 4,000 '<' are shown as 512 of them (2 KiB
// of HTML) and a marker each; the page's text stays near 520 lines of 2 KiB.
func TestReadLogOfHostileLines(t *testing.T) {
	line := "Warning:latex:amp " + strings.Repeat("<", 4000) + "\n"
	var v logView
	readLog(strings.NewReader(strings.Repeat(line, 1100)), farDeadline(), &v)
	require.EqualValues(t, 1100, v.Lines)
	require.Equal(t, logHeadLines+logTailLines, v.CutLines)
	require.Equal(t, "Warning:latex:amp "+strings.Repeat("<", (logLineHTML-18)/4)+" … [cut: 4,018 bytes in all]", v.Head[0].Text)
	require.EqualValues(t, 1100, v.Tail[logTailLines-1].N)
}

// TestReadLogStops: reading stops at logScanBytes (the last lines shown are the last read) and at
// the deadline (nothing more is read once it has passed).
func TestReadLogStops(t *testing.T) {
	big := strings.Repeat(strings.Repeat("x", 1023)+"\n", logScanBytes/1024+100)
	var v logView
	readLog(strings.NewReader(big), farDeadline(), &v)
	require.True(t, v.Partial)
	require.False(t, v.Late)
	require.EqualValues(t, logScanBytes, v.Read)
	require.EqualValues(t, logScanBytes/1024, v.Lines)
	require.EqualValues(t, v.Lines, v.Tail[len(v.Tail)-1].N)

	var late logView
	readLog(strings.NewReader(big), &deadline{at: time.Now().Add(-time.Second)}, &late)
	require.True(t, late.Late)
	require.Zero(t, late.Read)
	require.Empty(t, late.Head)
}

// TestTextBudgetClipsPastItsBudget: a list's details are clipped at 2 KiB of HTML each until the
// list has shown 512 KiB of them, then at 256 bytes, each cut one marked.
func TestTextBudgetClipsPastItsBudget(t *testing.T) {
	b := newTextBudget()
	details := strings.Repeat("<", 2000)
	var full, spent int
	for range 1000 {
		s := b.clipLines(details)
		require.True(t, strings.HasSuffix(s, " … [cut: 2,000 bytes in all]"))
		switch strings.Count(s, "<") {
		case detailsHTML / 4:
			full++
		case spentHTML / 4:
			spent++
		default:
			t.Fatalf("clipped to %d", strings.Count(s, "<"))
		}
	}
	require.Equal(t, 1000, full+spent)
	require.InDelta(t, listHTML/detailsHTML, full, 8)
	require.Equal(t, "short", newTextBudget().clipLines("short"))
}
