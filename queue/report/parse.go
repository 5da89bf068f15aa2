package report

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue"
)

// MaxMessagesDefault is how many messages of each severity a report keeps from one log by
// default, as CorTeX did (Options.MaxMessages).
const MaxMessagesDefault = 1000

// maxLoadedNameBytes bounds the file name of a "(Loading …)" line, as in CorTeX.
const maxLoadedNameBytes = 100

// nonUTF8Log is the message added to a log that is not valid UTF-8.
var nonUTF8Log = queue.Message{
	Severity: queue.SeverityWarning, Category: "cortex", What: "non_utf8_log",
	Details: "the worker log was not valid UTF-8; decoded lossily",
}

// replacement is U+FFFD, which stands for each invalid byte of a field.
var replacement = []byte(string(utf8.RuneError))

// ParseLog derives a report from the text of a cortex.log. It never fails: text that is not a
// message is skipped, and the status of a log without a status line is Fatal.
// At most MaxMessagesDefault messages of each severity are kept.
func ParseLog(data []byte) queue.Report {
	return parse(data, -1, MaxMessagesDefault)
}

// ReadLog reads at most limit bytes of a cortex.log from r and parses them. A longer log is cut
// at its last complete line within the limit and gets a Warning cortex/log_truncated. A limit of
// zero or less means MaxLogBytesDefault. At most MaxMessagesDefault messages of each severity are
// kept. The error is r's read error, if any.
func ReadLog(r io.Reader, limit int64) (queue.Report, error) {
	return readLog(r, Options{MaxLogBytes: limit}.withDefaults(), 0)
}

// readLog is ReadLog within opts (defaults applied), with a hint of the log's size, used to size
// the buffer.
func readLog(r io.Reader, opts Options, hint uint64) (queue.Report, error) {
	limit := opts.MaxLogBytes
	// Grow the buffer on a believable hint only: a lying header must not make us allocate.
	var buf bytes.Buffer
	if hint > 0 {
		buf.Grow(int(min(hint, uint64(limit), 1<<20)) + 1)
	}
	n := limit
	if n < math.MaxInt64 {
		n++ // one byte more tells a log of exactly limit bytes from a longer one
	}
	if _, err := buf.ReadFrom(io.LimitReader(r, n)); err != nil {
		return queue.Report{}, fmt.Errorf("read log: %w", err)
	}
	data := buf.Bytes()
	if int64(len(data)) <= limit {
		return parse(data, -1, opts.MaxMessages), nil
	}
	data = data[:limit]
	// The last line was cut: drop it rather than parse half a status line or half a rune.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	return parse(data, limit, opts.MaxMessages), nil
}

// parse parses data, keeping at most maxMessages messages of each severity; truncatedAt ≥ 0
// says the log was cut at that many bytes.
func parse(data []byte, truncatedAt int64, maxMessages int) queue.Report {
	p := parser{report: queue.Report{Status: queue.StatusFatal}, current: -1, max: maxMessages}
	valid := utf8.Valid(data)
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
			line = bytes.TrimSuffix(line, []byte{'\r'})
		} else {
			line, data = data, nil
		}
		p.line(line)
	}
	for i, sev := range severities {
		if n := p.seen[i]; n > p.max {
			p.report.Messages = append(p.report.Messages, queue.Message{
				Severity: sev, Category: "cortex", What: "messages_truncated",
				Details: fmt.Sprintf("%d %s messages in all; the first %d were kept", n, sev, p.max),
			})
		}
	}
	if truncatedAt >= 0 {
		p.report.Messages = append(p.report.Messages, queue.Message{
			Severity: queue.SeverityWarning, Category: "cortex", What: "log_truncated",
			Details: fmt.Sprintf("the worker log was longer than %d bytes; only its complete lines within that limit were read", truncatedAt),
		})
	}
	if !valid {
		p.report.Messages = append(p.report.Messages, nonUTF8Log)
	}
	return p.report
}

// parser is the state of one pass over a log.
type parser struct {
	report queue.Report
	// inDetails is set after a message line: tab-led lines that follow continue it.
	inDetails bool
	// current is the index in report.Messages of the message being continued, or -1 when that
	// message is not stored (a status line, a retryable tag, a message over max).
	current int
	// max is how many messages of each severity are stored; seen counts them all, by severity
	// (the index in severities).
	max  int
	seen [len(severities)]int
}

// severities are the message severities, in the order of their cortex/messages_truncated
// messages.
var severities = [...]queue.Severity{queue.SeverityInfo, queue.SeverityWarning, queue.SeverityError,
	queue.SeverityFatal, queue.SeverityInvalid}

// line handles one line, without its line ending.
func (p *parser) line(line []byte) {
	if len(line) == 0 {
		return
	}
	if p.inDetails && line[0] == '\t' {
		p.continueDetails(line)
		return
	}
	p.inDetails = false
	if severity, category, what, details, ok := splitMessage(line); ok {
		p.message(severity, category, what, details)
		p.inDetails = true
		return
	}
	if pathStart, nameStart, end, ok := matchLoading(line); ok {
		p.store(queue.Message{
			Severity: queue.SeverityInfo,
			Category: "loaded_file",
			What:     clean(line[nameStart:end], maxLoadedNameBytes),
			Details:  clean(line[pathStart:end], queue.MaxDetailsBytes),
		})
	}
}

// matchLoading matches LaTeXML's "(Loading /dir/name.sty... 0.1 sec)" lines as the reference's
// `^\((?:Loading|Processing definitions)\s(.+/)?([^/]+[^.])\.\.\.(\s|$)` (\s being Unicode
// white space) does, reporting where the path and the file name start and where both end. It is
// written out because the regular expression costs half of a typical log's parse; the tests
// check it against the expression.
func matchLoading(line []byte) (pathStart, nameStart, end int, ok bool) {
	var rest []byte
	switch {
	case bytes.HasPrefix(line, []byte("(Loading")):
		rest = line[len("(Loading"):]
	case bytes.HasPrefix(line, []byte("(Processing definitions")):
		rest = line[len("(Processing definitions"):]
	default:
		return 0, 0, 0, false
	}
	r, n := utf8.DecodeRune(rest)
	if !unicode.IsSpace(r) {
		return 0, 0, 0, false
	}
	off := len(line) - len(rest) + n
	s := line[off:]
	// (.+/)? is greedy: try the directory ending at each slash, the last first, then none.
	for k := bytes.LastIndexByte(s, '/'); k >= 1; k = bytes.LastIndexByte(s[:k], '/') {
		if e, ok := matchLoadedName(s, k+1); ok {
			return off, off + k + 1, off + e, true
		}
	}
	if e, ok := matchLoadedName(s, 0); ok {
		return off, off, off + e, true
	}
	return 0, 0, 0, false
}

// matchLoadedName matches `([^/]+[^.])\.\.\.(\s|$)` at s[q:], reporting where the name ends:
// the greedy [^/]+ makes it the last end that matches.
func matchLoadedName(s []byte, q int) (int, bool) {
	// [^/]+ stops before the first slash; [^.] may then take one more rune, even that slash. Every
	// end up to limit thus leaves a slash-free [^/]+.
	limit := len(s)
	if i := bytes.IndexByte(s[q:], '/'); i >= 0 {
		_, n := utf8.DecodeRune(s[q+i:])
		limit = q + i + n
	}
	for e := min(limit, len(s)-3); e >= q+2; e-- {
		if s[e] != '.' || s[e+1] != '.' || s[e+2] != '.' {
			continue
		}
		last, n := utf8.DecodeLastRune(s[q:e])
		if last == '.' || e-n <= q {
			continue
		}
		if after, _ := utf8.DecodeRune(s[e+3:]); e+3 == len(s) || unicode.IsSpace(after) {
			return e, true
		}
	}
	return 0, false
}

// splitMessage splits a message line `severity:category:what[ details]` (the reference's
// `^([^ :]+):([^ :]+):([^ ]+)(\s(.*))?$`: what runs to the first space, so the separator before
// details is always a space).
func splitMessage(line []byte) (severity, category, what, details []byte, ok bool) {
	i := bytes.IndexByte(line, ':')
	if i <= 0 || bytes.IndexByte(line[:i], ' ') >= 0 {
		return nil, nil, nil, nil, false
	}
	severity, rest := line[:i], line[i+1:]
	i = bytes.IndexByte(rest, ':')
	if i <= 0 || bytes.IndexByte(rest[:i], ' ') >= 0 {
		return nil, nil, nil, nil, false
	}
	category, rest = rest[:i], rest[i+1:]
	switch i = bytes.IndexByte(rest, ' '); {
	case len(rest) == 0 || i == 0:
		return nil, nil, nil, nil, false
	case i < 0:
		what = rest
	default:
		what, details = rest[:i], rest[i+1:]
	}
	return severity, category, what, details, true
}

// message handles one parsed message line: the status line and the retryable tag set the report,
// anything else is stored.
func (p *parser) message(severityWord, category, what, details []byte) {
	severity := severityOf(severityWord)
	if severity == queue.SeverityFatal && string(category) == "invalid" {
		severity, category, what = queue.SeverityInvalid, what, []byte("all")
	}
	m := queue.Message{
		Severity: severity,
		Category: clean(category, queue.MaxCategoryBytes),
		What:     clean(what, queue.MaxWhatBytes),
		Details:  clean(details, queue.MaxDetailsBytes),
	}
	p.current = -1
	switch {
	case m.Severity == queue.SeverityInvalid:
		p.report.Status = queue.StatusInvalid
	case m.Severity == queue.SeverityInfo && m.Category == "conversion" && m.What != "":
		if p.report.Status != queue.StatusInvalid {
			p.report.Status = queue.StatusFromConversion(conversionN(m.What))
		}
		return
	case m.Category == "cortex" && m.What == "retryable" && bytes.EqualFold(severityWord, []byte("info")):
		p.report.Retryable = true
		return
	}
	if p.store(m) {
		p.current = len(p.report.Messages) - 1
	}
}

// store counts m and keeps it unless max messages of its severity are already kept, and
// reports whether it did.
func (p *parser) store(m queue.Message) bool {
	i := 0
	for i < len(severities)-1 && severities[i] != m.Severity {
		i++
	}
	p.seen[i]++
	if p.seen[i] > p.max {
		return false
	}
	p.report.Messages = append(p.report.Messages, m)
	return true
}

// continueDetails appends a continuation line to the current message's details, within the
// details limit.
func (p *parser) continueDetails(line []byte) {
	if p.current < 0 {
		return
	}
	m := &p.report.Messages[p.current]
	// Bytes left for the line after its "\n", keeping the total strictly below the limit.
	room := queue.MaxDetailsBytes - 1 - len(m.Details) - 1
	if room < 0 {
		return
	}
	m.Details += "\n" + clean(line, room+1)
}

// severityOf maps a severity word to a Severity without converting words too long to be one.
func severityOf(word []byte) queue.Severity {
	if len(word) > len("warning") {
		return queue.SeverityInfo
	}
	return queue.SeverityOf(string(word))
}

// conversionN reads the N of a status line; a what that is not a 32-bit integer reads as 3.
func conversionN(what string) int {
	n, err := strconv.ParseInt(what, 10, 32)
	if err != nil {
		return 3
	}
	return int(n)
}

// clean makes a field out of b: invalid UTF-8 bytes become U+FFFD, NULs are removed, and the
// result is cut on a character boundary to strictly fewer than limit bytes.
func clean(b []byte, limit int) string {
	budget := limit - 1
	if len(b) <= budget && bytes.IndexByte(b, 0) < 0 && utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, min(len(b), budget))
	for len(b) > 0 {
		if c := b[0]; c < utf8.RuneSelf {
			if c != 0 {
				if len(out) == budget {
					break
				}
				out = append(out, c)
			}
			b = b[1:]
			continue
		}
		r, n := utf8.DecodeRune(b)
		enc := b[:n]
		if r == utf8.RuneError && n == 1 {
			enc = replacement
		}
		if len(out)+len(enc) > budget {
			break
		}
		out = append(out, enc...)
		b = b[n:]
	}
	return string(out)
}
