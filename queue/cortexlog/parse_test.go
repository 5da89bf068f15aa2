package cortexlog

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
)

func info(category, what, details string) queue.Message {
	return queue.Message{Severity: queue.SeverityInfo, Category: category, What: what, Details: details}
}

func warning(category, what, details string) queue.Message {
	return queue.Message{Severity: queue.SeverityWarning, Category: category, What: what, Details: details}
}

func errorMsg(category, what, details string) queue.Message {
	return queue.Message{Severity: queue.SeverityError, Category: category, What: what, Details: details}
}

func fatal(category, what, details string) queue.Message {
	return queue.Message{Severity: queue.SeverityFatal, Category: category, What: what, Details: details}
}

func invalid(category, what, details string) queue.Message {
	return queue.Message{Severity: queue.SeverityInvalid, Category: category, What: what, Details: details}
}

func TestParseLog(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		log       string
		status    queue.Status
		messages  []queue.Message
		retryable bool
	}{
		// Status derivation.
		{name: "EmptyLogIsFatal", log: "", status: queue.StatusFatal},
		{
			name:     "NoStatusLineIsFatalWithMessages",
			log:      "Warning:tex:undefined_macro \\foo\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{warning("tex", "undefined_macro", "\\foo")},
		},
		{name: "Conversion0IsNoProblem", log: "Info:conversion:0\n", status: queue.StatusNoProblem},
		{name: "Conversion1IsWarning", log: "Info:conversion:1\n", status: queue.StatusWarning},
		{name: "Conversion2IsError", log: "Info:conversion:2\n", status: queue.StatusError},
		{name: "Conversion3IsFatal", log: "Info:conversion:3\n", status: queue.StatusFatal},
		{name: "Conversion4IsInvalid", log: "Info:conversion:4\n", status: queue.StatusInvalid},
		{name: "Conversion5ClampsToInvalid", log: "Info:conversion:5\n", status: queue.StatusInvalid},
		{name: "Conversion999ClampsToInvalid", log: "Info:conversion:999\n", status: queue.StatusInvalid},
		{name: "ConversionMinus1ClampsToFatal", log: "Info:conversion:-1\n", status: queue.StatusFatal},
		{name: "ConversionMinus2ClampsToFatal", log: "Info:conversion:-2\n", status: queue.StatusFatal},
		{name: "ConversionPlusSignParses", log: "Info:conversion:+1\n", status: queue.StatusWarning},
		{name: "UnparsableConversionReadsAs3", log: "Info:conversion:zero\n", status: queue.StatusFatal},
		{name: "ConversionOverflowingInt32ReadsAs3", log: "Info:conversion:4294967297\n", status: queue.StatusFatal},
		{name: "StatusSeverityIsAStatusLine", log: "Status:conversion:1\n", status: queue.StatusWarning},
		{name: "StatusLineSeverityIsCaseInsensitive", log: "STATUS:conversion:0\n", status: queue.StatusNoProblem},
		{name: "LowerCaseInfoIsAStatusLine", log: "info:conversion:2\n", status: queue.StatusError},
		{name: "AnyInfoTypeSeverityIsAStatusLine", log: "debug:conversion:0\n", status: queue.StatusNoProblem},
		{name: "StatusLineDetailsAreIgnored", log: "Status:conversion:0 all good\n", status: queue.StatusNoProblem},
		{
			name:     "ErrorConversionIsAnErrorMessageNotTheStatus",
			log:      "Error:conversion:2 oops\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("conversion", "2", "oops")},
		},
		{
			name:     "ConversionCategoryIsCaseSensitive",
			log:      "Info:Conversion:0\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{info("Conversion", "0", "")},
		},
		{name: "LastStatusLineWins", log: "Status:conversion:2\nStatus:conversion:0\n", status: queue.StatusNoProblem},
		{
			name:     "InvalidBeforeStatusLineSticks",
			log:      "Invalid:latexml:bad_input x\nStatus:conversion:0\n",
			status:   queue.StatusInvalid,
			messages: []queue.Message{invalid("latexml", "bad_input", "x")},
		},
		{
			name:     "InvalidAfterStatusLineWins",
			log:      "Status:conversion:0\nINVALID:latexml:bad_input x\n",
			status:   queue.StatusInvalid,
			messages: []queue.Message{invalid("latexml", "bad_input", "x")},
		},
		{name: "Conversion4StaysInvalidAfterALaterStatusLine", log: "Status:conversion:4\nStatus:conversion:0\n", status: queue.StatusInvalid},
		{
			name:     "FatalInvalidIsRewrittenToInvalidAll",
			log:      "Fatal:invalid:not_a_paper missing \\begin{document}\n",
			status:   queue.StatusInvalid,
			messages: []queue.Message{invalid("not_a_paper", "all", "missing \\begin{document}")},
		},
		{
			name:     "FatalInvalidRewriteTruncatesTheCategory",
			log:      "fatal:invalid:" + strings.Repeat("x", 150) + "\n",
			status:   queue.StatusInvalid,
			messages: []queue.Message{invalid(strings.Repeat("x", 99), "all", "")},
		},
		{
			name:     "FatalOtherCategoryStaysFatal",
			log:      "Fatal:timeout:wallclock 300s\nStatus:conversion:3\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{fatal("timeout", "wallclock", "300s")},
		},

		// Severities.
		{
			name:   "SeverityWordsMap",
			log:    "warn:a:b\nWARNING:a:b\nError:a:b\nfatal:a:b\nInfo:a:b\nDebug:a:b\n",
			status: queue.StatusFatal,
			messages: []queue.Message{
				warning("a", "b", ""), warning("a", "b", ""), errorMsg("a", "b", ""),
				fatal("a", "b", ""), info("a", "b", ""), info("a", "b", ""),
			},
		},

		// Line syntax.
		{
			name:     "WhatRunsToTheFirstSpaceKeepingColonsAndTabs",
			log:      "Error:a:b:c\td e f\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", "b:c\td", "e f")},
		},
		{
			name:     "TrailingSpaceGivesEmptyDetails",
			log:      "Error:a:b \n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", "b", "")},
		},
		{name: "SpaceInSeverityIsNotAMessage", log: "An error: a:b c\n", status: queue.StatusFatal},
		{name: "SpaceInCategoryIsNotAMessage", log: "Error:a b:c d\n", status: queue.StatusFatal},
		{name: "EmptySeverityIsNotAMessage", log: ":a:b\n", status: queue.StatusFatal},
		{name: "EmptyCategoryIsNotAMessage", log: "Error::b\n", status: queue.StatusFatal},
		{name: "EmptyWhatIsNotAMessage", log: "Error:a:\nError:a: b\n", status: queue.StatusFatal},
		{name: "PlainTextIsSkipped", log: "Conversion complete: 1 warning\n", status: queue.StatusFatal},
		{
			name:     "EmptyLinesAreSkipped",
			log:      "\n\nWarning:a:b\n\n\nStatus:conversion:1\n\n",
			status:   queue.StatusWarning,
			messages: []queue.Message{warning("a", "b", "")},
		},
		{
			name:     "CRLFLineEndings",
			log:      "Warning:a:b c\r\n\tmore\r\nStatus:conversion:1\r\n",
			status:   queue.StatusWarning,
			messages: []queue.Message{warning("a", "b", "c\n\tmore")},
		},
		{
			name:     "LoneCRIsKept",
			log:      "Warning:a:b c\rd\nStatus:conversion:1\r",
			status:   queue.StatusFatal, // "1\r" is not an integer
			messages: []queue.Message{warning("a", "b", "c\rd")},
		},
		{
			name:     "LastLineNeedsNoNewline",
			log:      "Warning:a:b\nStatus:conversion:1",
			status:   queue.StatusWarning,
			messages: []queue.Message{warning("a", "b", "")},
		},

		// Continuation lines.
		{
			name:     "TabLinesContinueTheMessage",
			log:      "Error:undefined:\\foo at line 3\n\tcontext one\n\tcontext two\nWarning:x:y\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("undefined", "\\foo", "at line 3\n\tcontext one\n\tcontext two"), warning("x", "y", "")},
		},
		{
			name:     "ContinuationOfEmptyDetailsStartsWithNewline",
			log:      "Error:a:b\n\tc\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", "b", "\n\tc")},
		},
		{
			name:     "TabLineLookingLikeAMessageContinues",
			log:      "Error:a:b\n\tWarning:c:d\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", "b", "\n\tWarning:c:d")},
		},
		{
			name:     "EmptyLineDoesNotEndContinuation",
			log:      "Error:a:b c\n\n\td\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", "b", "c\n\td")},
		},
		{
			name:     "OtherLineEndsContinuation",
			log:      "Error:a:b c\nplain text\n\tnot continued\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", "b", "c")},
		},
		{name: "TabLineWithoutMessageIsSkipped", log: "\tstray\n", status: queue.StatusFatal},
		{
			name:   "ContinuationOfStatusLineIsDropped",
			log:    "Status:conversion:0\n\tdetail\n",
			status: queue.StatusNoProblem,
		},

		// Loading lines.
		{
			name:     "LoadingLine",
			log:      "(Loading /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml... 0.43 sec)\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{info("loaded_file", "TeX.pool.ltxml", "/usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml")},
		},
		{
			name:     "ProcessingDefinitionsLine",
			log:      "(Processing definitions /tmp/paper/macros.sty...\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{info("loaded_file", "macros.sty", "/tmp/paper/macros.sty")},
		},
		{
			name:     "LoadingLineWithoutDirectory",
			log:      "(Loading amsmath.sty...\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{info("loaded_file", "amsmath.sty", "amsmath.sty")},
		},
		{name: "LoadingLineNeedsSpaceOrEndAfterDots", log: "(Loading amsmath.sty...)\n", status: queue.StatusFatal},
		{
			name:     "LoadingLineEndsContinuation",
			log:      "Error:a:b c\n(Loading /x/y.sty...\n\tnot continued\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", "b", "c"), info("loaded_file", "y.sty", "/x/y.sty")},
		},
		{
			name:     "LoadingLineNameIsTruncated",
			log:      "(Loading /x/" + strings.Repeat("n", 150) + ".sty...\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{info("loaded_file", strings.Repeat("n", 99), "/x/"+strings.Repeat("n", 150)+".sty")},
		},

		// Truncation and cleaning.
		{
			name:     "CategoryTruncatedOnCharBoundary",
			log:      "Error:" + strings.Repeat("€", 50) + ":b\n", // 150 bytes; 33 runes fit in 99
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg(strings.Repeat("€", 33), "b", "")},
		},
		{
			name:     "WhatTruncatedOnCharBoundary",
			log:      "Error:a:" + strings.Repeat("é", 150) + "\n", // 300 bytes; 99 runes fit in 199
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", strings.Repeat("é", 99), "")},
		},
		{
			name:     "DetailsTruncatedOnCharBoundary",
			log:      "Error:a:b " + strings.Repeat("𝔸", 600) + "\n", // 2400 bytes; 499 runes fit in 1999
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", "b", strings.Repeat("𝔸", 499))},
		},
		{
			name:     "FieldsOneByteUnderTheLimitAreKept",
			log:      "Error:" + strings.Repeat("c", 99) + ":" + strings.Repeat("w", 199) + " " + strings.Repeat("d", 1999) + "\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg(strings.Repeat("c", 99), strings.Repeat("w", 199), strings.Repeat("d", 1999))},
		},
		{
			name:     "FieldsAtTheLimitLoseOneByte",
			log:      "Error:" + strings.Repeat("c", 100) + ":" + strings.Repeat("w", 200) + " " + strings.Repeat("d", 2000) + "\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg(strings.Repeat("c", 99), strings.Repeat("w", 199), strings.Repeat("d", 1999))},
		},
		{
			name:     "ContinuationStopsAtTheDetailsLimit",
			log:      "Error:a:b " + strings.Repeat("d", 1990) + "\n\t" + strings.Repeat("é", 10) + "\n\tmore\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("a", "b", strings.Repeat("d", 1990)+"\n\t"+strings.Repeat("é", 3)+"\n")},
		},
		{
			name:     "NULsAreRemoved",
			log:      "Error:a\x00b:c\x00d e\x00f\n\t\x00g\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg("ab", "cd", "ef\n\tg")},
		},

		// Non-UTF-8 logs.
		{
			name:     "NonUTF8IsDecodedLossilyAndFlagged",
			log:      "Error:a\xff:b c\xfe\xfdd\nStatus:conversion:2\n",
			status:   queue.StatusError,
			messages: []queue.Message{errorMsg("a\uFFFD", "b", "c\uFFFD\uFFFDd"), nonUTF8Log},
		},
		{
			name:     "NonUTF8InSkippedLineIsStillFlagged",
			log:      "garbage \xc3\x28\nStatus:conversion:0\n",
			status:   queue.StatusNoProblem,
			messages: []queue.Message{nonUTF8Log},
		},
		{
			name:     "TruncationNeverSplitsAReplacementCharacter",
			log:      "Error:" + strings.Repeat("\xff", 40) + ":b\n", // 40 × 3 bytes; 33 fit in 99
			status:   queue.StatusFatal,
			messages: []queue.Message{errorMsg(strings.Repeat("\uFFFD", 33), "b", ""), nonUTF8Log},
		},

		// Retryable tag.
		{
			name:      "RetryableTagSetsRetryable",
			log:       "Fatal:timeout:wallclock\nInfo:cortex:retryable\n",
			status:    queue.StatusFatal,
			messages:  []queue.Message{fatal("timeout", "wallclock", "")},
			retryable: true,
		},
		{name: "RetryableTagSeverityIsCaseInsensitive", log: "INFO:cortex:retryable oom:shed\n", status: queue.StatusFatal, retryable: true},
		{
			name:     "RetryableTagNeedsInfoSeverity",
			log:      "Warning:cortex:retryable\nStatus:cortex:retryable\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{warning("cortex", "retryable", ""), info("cortex", "retryable", "")},
		},
		{
			name:     "RetryableTagNeedsExactCategoryAndWhat",
			log:      "Info:Cortex:retryable\nInfo:cortex:Retryable\n",
			status:   queue.StatusFatal,
			messages: []queue.Message{info("Cortex", "retryable", ""), info("cortex", "Retryable", "")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := parseLog([]byte(tt.log))
			require.Equal(t, queue.Report{Status: tt.status, Messages: tt.messages, Retryable: tt.retryable}, got)
			requireWellFormed(t, got)
		})
	}
}

// TestParseLogKeepsAtMostMaxMessagesPerSeverity: each severity keeps its first
// MaxMessagesDefault messages, and one cortex/messages_truncated of that severity gives the exact
// total of an overflowing one; messages past the cap still count for the status.
func TestParseLogKeepsAtMostMaxMessagesPerSeverity(t *testing.T) {
	t.Parallel()
	const max = MaxMessagesDefault
	var log bytes.Buffer
	for i := range max + 5 {
		fmt.Fprintf(&log, "Warning:tex:w%d\n\tcontext\n", i)
		if i < 3 {
			fmt.Fprintf(&log, "Error:tex:e%d\n", i)
		}
	}
	for i := range 2*max + 1 {
		fmt.Fprintf(&log, "(Loading /texmf/f%d.sty... 0.1 sec)\n", i)
	}
	log.WriteString("Invalid:tex:late still counts\n")
	log.WriteString("Status:conversion:1\n")
	got := parseLog(log.Bytes())

	require.Equal(t, queue.StatusInvalid, got.Status, "messages over the cap still count for the status")
	bySeverity := map[queue.Severity][]queue.Message{}
	for _, m := range got.Messages {
		bySeverity[m.Severity] = append(bySeverity[m.Severity], m)
	}
	require.Len(t, bySeverity[queue.SeverityWarning], max+1)
	require.Equal(t, warning("tex", fmt.Sprint("w", max-1), "\n\tcontext"), bySeverity[queue.SeverityWarning][max-1])
	require.Len(t, bySeverity[queue.SeverityError], 3, "a severity within the cap is whole, with no summary")
	require.Len(t, bySeverity[queue.SeverityInfo], max+1)
	require.Len(t, bySeverity[queue.SeverityInvalid], 1)
	require.Equal(t, []queue.Message{
		{Severity: queue.SeverityInfo, Category: "cortex", What: "messages_truncated",
			Details: fmt.Sprintf("%d info messages in all; the first %d were kept", 2*max+1, max)},
		{Severity: queue.SeverityWarning, Category: "cortex", What: "messages_truncated",
			Details: fmt.Sprintf("%d warning messages in all; the first %d were kept", max+5, max)},
	}, got.Messages[len(got.Messages)-2:], "the summaries come last, in severity order")
}

// TestParseMaxMessages: Options.MaxMessages sets the cap.
func TestParseMaxMessages(t *testing.T) {
	t.Parallel()
	log := strings.Repeat("Fatal:x:y\n", 7)
	got, err := Parse(strings.NewReader(log), Options{MaxMessages: 2})
	require.NoError(t, err)
	require.Len(t, got.Messages, 3)
	require.Equal(t, queue.Message{Severity: queue.SeverityFatal, Category: "cortex", What: "messages_truncated",
		Details: "7 fatal messages in all; the first 2 were kept"}, got.Messages[2])
}

func TestParse(t *testing.T) {
	t.Parallel()
	const log = "Warning:a:b\nStatus:conversion:1\n"

	t.Run("LogWithinTheLimitIsParsedWhole", func(t *testing.T) {
		t.Parallel()
		got, err := Parse(strings.NewReader(log), Options{MaxLogBytes: int64(len(log))})
		require.NoError(t, err)
		require.Equal(t, queue.Report{Status: queue.StatusWarning, Messages: []queue.Message{warning("a", "b", "")}}, got)
	})
	t.Run("LongerLogIsCutAtItsLastLineAndFlagged", func(t *testing.T) {
		t.Parallel()
		got, err := Parse(strings.NewReader(log), Options{MaxLogBytes: int64(len(log)) - 1})
		require.NoError(t, err)
		require.Equal(t, queue.StatusFatal, got.Status, "the cut status line is dropped, not read as Status:conversion:")
		require.Len(t, got.Messages, 2)
		require.Equal(t, warning("a", "b", ""), got.Messages[0])
		require.Equal(t, "log_truncated", got.Messages[1].What)
		require.Equal(t, queue.SeverityWarning, got.Messages[1].Severity)
	})
	t.Run("CutDropsThePartialLineAndNeverSplitsARune", func(t *testing.T) {
		t.Parallel()
		// 29 bytes; the limit falls inside the second line's é.
		got, err := Parse(strings.NewReader("Warning:a:b é\n"+"Warning:a:c é"), Options{MaxLogBytes: 28})
		require.NoError(t, err)
		require.Equal(t, []queue.Message{warning("a", "b", "é"), got.Messages[1]}, got.Messages)
		require.Equal(t, "log_truncated", got.Messages[1].What)
	})
	t.Run("ZeroLimitMeansDefault", func(t *testing.T) {
		t.Parallel()
		got, err := Parse(strings.NewReader(log), Options{MaxLogBytes: 0})
		require.NoError(t, err)
		require.Equal(t, queue.StatusWarning, got.Status)
	})
	t.Run("ReadErrorIsReturned", func(t *testing.T) {
		t.Parallel()
		_, err := Parse(iotest.TimeoutReader(iotest.OneByteReader(strings.NewReader(log))), Options{MaxLogBytes: 1 << 10})
		require.ErrorIs(t, err, iotest.ErrTimeout)
	})
}

// requireWellFormed checks what every report must satisfy, whatever the log.
func requireWellFormed(t testing.TB, r queue.Report) {
	t.Helper()
	require.True(t, r.Status.Terminal(), "status %v", r.Status)
	require.LessOrEqual(t, len(r.Messages), len(severities)*(MaxMessagesDefault+1)+2)
	for _, m := range r.Messages {
		switch m.Severity {
		case queue.SeverityInfo, queue.SeverityWarning, queue.SeverityError, queue.SeverityFatal, queue.SeverityInvalid:
		default:
			t.Fatalf("severity %q", m.Severity)
		}
		for _, f := range []struct {
			value string
			limit int
		}{{m.Category, queue.MaxCategoryBytes}, {m.What, queue.MaxWhatBytes}, {m.Details, queue.MaxDetailsBytes}} {
			require.Less(t, len(f.value), f.limit, "field %q", f.value)
			require.True(t, utf8.ValidString(f.value), "field %q", f.value)
			require.NotContains(t, f.value, "\x00")
		}
	}
}

// loadingLine is the reference's expression for "(Loading …)" lines, \s spelt out as Unicode
// white space (RE2's \s is ASCII only): matchLoading must agree with it.
var loadingLine = regexp.MustCompile(`^\((?:Loading|Processing definitions)[\t\n\v\f\r \x{85}\p{Z}](.+/)?([^/]+[^.])\.\.\.(?:[\t\n\v\f\r \x{85}\p{Z}]|$)`)

// requireLoadingAgrees checks matchLoading against loadingLine on line.
func requireLoadingAgrees(t testing.TB, line []byte) {
	t.Helper()
	pathStart, nameStart, end, ok := matchLoading(line)
	m := loadingLine.FindSubmatchIndex(line)
	require.Equal(t, m != nil, ok, "match of %q", line)
	if m == nil {
		return
	}
	wantPath := m[4]
	if m[2] >= 0 {
		wantPath = m[2]
	}
	require.Equal(t, []int{wantPath, m[4], m[5]}, []int{pathStart, nameStart, end}, "spans of %q", line)
}

func TestMatchLoadingAgreesWithTheReferenceExpression(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		"(Loading /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml... 0.43 sec)",
		"(Processing definitions /tmp/paper/macros.sty...",
		"(Loading amsmath.sty...",
		"(Loading amsmath.sty...)",
		"(Loading a/b.sty... c/d.sty... ",
		"(Loading /a/...b/c.sty... x",
		"(Loading /a/b/...",
		"(Loading /a/b/... ",
		"(Loading /a/bc/... ",
		"(Loading x/... ",
		"(Loading //... ",
		"(Loading /ab.... ",
		"(Loading ab.... ",
		"(Loading a..... ",
		"(Loading é/€... ",
		"(Loading \xff/\xfe\xfd... ",
		"(Loading \xe2\x82/\xf0\x9d\x94... ",
		"(Loading\u2003/x/y.sty...\u00a0z",
		"(Loading\t/x/y.sty...\u3000",
		"(Loading\u200b/x/y.sty... ",
		"(Loadingx /x/y.sty... ",
		"(Loading  /x/y.sty... ",
		"(Loading /x/y.sty...x",
		"(Processing definitions ab... ",
		"(Processing  definitions ab... ",
		"Loading /x/y.sty... ",
		"(Loading ",
		"(Loading",
	} {
		requireLoadingAgrees(t, []byte(line))
	}
}

// FuzzMatchLoading checks matchLoading against the reference expression.
func FuzzMatchLoading(f *testing.F) {
	for _, seed := range []string{
		"(Loading /usr/share/x.sty... 0.1 sec)", "(Processing definitions a/b/c...", "(Loading /a/...b/c... x",
		"(Loading\u2003é/\xff... ",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.IndexByte(line, '\n') >= 0 {
			return // lines never hold one; RE2's . would not match it
		}
		requireLoadingAgrees(t, line)
	})
}

// The interner gives equal bytes one string while they keep their slot, and holds
// internSlots strings whatever it is given.
func TestInternerSharesWithinItsSlots(t *testing.T) {
	var in interner
	a, b := in.intern([]byte("amsmath.sty.ltxml")), in.intern([]byte("amsmath.sty.ltxml"))
	require.Equal(t, "amsmath.sty.ltxml", a)
	require.Same(t, unsafe.StringData(a), unsafe.StringData(b))
	for i := range 3 * internSlots {
		want := "what_" + strconv.Itoa(i)
		require.Equal(t, want, in.intern([]byte(want)))
	}
	require.Len(t, in.slots, internSlots)
	// The empty field too.
	require.Equal(t, "", in.intern(nil))
}

// The worker's stage line (docs/stages.md#the-stage-line) sets Report.Stages and is not stored;
// a Warning of that name is an ordinary message.
func TestParseStageLine(t *testing.T) {
	t.Parallel()
	rep, err := Parse(strings.NewReader("Info:cortexq:stage_ms unpack=12 convert=3400 pack=20\nWarning:cortexq:stage_ms x\nStatus:conversion:0\n"), Options{})
	require.NoError(t, err)
	require.Equal(t, queue.StatusNoProblem, rep.Status)
	require.Equal(t, []queue.Message{warning("cortexq", "stage_ms", "x")}, rep.Messages)
	require.NotNil(t, rep.Stages)
	require.Equal(t, "12ms 3.4s 20ms", fmt.Sprint(rep.Stages[queue.StageUnpack], rep.Stages[queue.StageConvert], rep.Stages[queue.StagePack]))
	require.False(t, rep.Stages.Has(queue.StageWorker))

	rep, err = Parse(strings.NewReader("Info:cortexq:main_tex a.tex\nInfo:conversion:0\n"), Options{})
	require.NoError(t, err)
	require.Nil(t, rep.Stages, "an older worker sends none")
}
