package cortexlog

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"strconv"
	"sync"
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

// maxLineBytes is how much of a log line is parsed: the rest of a longer line is skipped (and
// only checked for UTF-8), so that a line without an end costs no more memory than this. Every
// field of a message is far shorter.
const maxLineBytes = 64 << 10

// Parse reads a cortex.log from r, at most opts.MaxLogBytes of it, and derives its report.
// Text that is not a message is skipped, and the status of a log without a status line is
// Fatal. A longer log is cut at its last complete line within the limit and gets a Warning
// cortex/log_truncated. At most opts.MaxMessages messages of each severity are kept. The error
// is r's read error, if any.
func Parse(r io.Reader, opts Options) (queue.Report, error) {
	opts = opts.withDefaults()
	rep, err := parse(r, opts.MaxLogBytes, opts.MaxMessages, opts.logSize)
	if err != nil {
		return queue.Report{}, fmt.Errorf("read log: %w", err)
	}
	return rep, nil
}

// parse reads a log from r line by line, in memory bounded by maxLineBytes whatever its size,
// keeping at most maxMessages messages of each severity. Only the lines that end within limit
// bytes are parsed (or the last line, without an end, of a log of at most limit bytes): a cut
// line is dropped rather than half a status line or half a rune parsed.
//
// size is what the log says its size is (0: unknown): room for the messages such a log holds is
// made at once (a LaTeXML log's hundred messages grew the slice eight times), within
// maxMessagesHint whatever it says.
func parse(r io.Reader, limit int64, maxMessages int, size int64) (queue.Report, error) {
	p := parser{report: queue.Report{Status: queue.StatusFatal}, current: -1, max: maxMessages}
	if n := min(size/bytesPerMessageHint, maxMessagesHint); n > 0 {
		p.report.Messages = make([]queue.Message, 0, n)
	}
	n := limit
	if n < math.MaxInt64 {
		n++ // one byte more tells a log of exactly limit bytes from a longer one
	}
	lr := lineReaders.Get().(*lineReader)
	defer lr.release()
	p.names = &lr.names
	lr.r.Reset(io.LimitReader(r, n))
	valid, truncated := true, false
	var read int64
	for {
		line, err := lr.next()
		if err != nil && err != io.EOF {
			return queue.Report{}, err
		}
		read += lr.took
		if read > limit {
			truncated = true
			break
		}
		if err == nil {
			line = bytes.TrimSuffix(line, []byte{'\r'}) // a \r\n line end
		}
		valid = valid && lr.valid
		p.line(line)
		if err == io.EOF {
			break
		}
	}
	for i, sev := range severities {
		if n := p.seen[i]; n > p.max {
			p.report.Messages = append(p.report.Messages, queue.Message{
				Severity: sev, Category: "cortex", What: "messages_truncated",
				Details: fmt.Sprintf("%d %s messages in all; the first %d were kept", n, sev, p.max),
			})
		}
	}
	if truncated {
		p.report.Messages = append(p.report.Messages, queue.Message{
			Severity: queue.SeverityWarning, Category: "cortex", What: "log_truncated",
			Details: fmt.Sprintf("the worker log was longer than %d bytes; only its complete lines within that limit were read", limit),
		})
	}
	if !valid {
		p.report.Messages = append(p.report.Messages, nonUTF8Log)
	}
	return p.report, nil
}

// bytesPerMessageHint is about the bytes of a LaTeXML log a message takes; maxMessagesHint bounds
// the room made from a log's claimed size (a hostile archive may claim any).
const (
	bytesPerMessageHint = 64
	maxMessagesHint     = 512
)

// lineReader splits a log into lines, keeping at most maxLineBytes of each.
type lineReader struct {
	r    *bufio.Reader
	line []byte
	// took is how many bytes the last line took from r, its end included; valid says whether
	// all of them (not only those kept) were UTF-8.
	took  int64
	valid bool
	utf8  utf8Stream
	// names are the short fields of the logs this reader parsed (parser.field).
	names interner
}

// lineReaders keeps lineReaders (a 64 KiB buffer, a line and an interner each) between parses: a
// replica parses a log per result, and allocating (and zeroing) the buffer anew was 5% of its
// CPU.
var lineReaders = sync.Pool{New: func() any {
	return &lineReader{r: bufio.NewReaderSize(nil, maxLineBytes)}
}}

// release puts lr back in lineReaders, holding no reference to the log it read.
func (lr *lineReader) release() {
	lr.r.Reset(nil)
	lr.line, lr.took, lr.valid, lr.utf8 = lr.line[:0], 0, false, utf8Stream{}
	lineReaders.Put(lr)
}

// next returns the next line without its \n, cut to maxLineBytes; the slice is valid until the
// next call. At the end of r it returns the last line (possibly empty) and io.EOF.
func (lr *lineReader) next() ([]byte, error) {
	lr.line, lr.took, lr.utf8 = lr.line[:0], 0, utf8Stream{}
	for {
		chunk, err := lr.r.ReadSlice('\n')
		lr.took += int64(len(chunk))
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		if room := maxLineBytes - len(lr.line); room > 0 {
			lr.line = append(lr.line, chunk[:min(room, len(chunk))]...)
		}
		lr.utf8.write(chunk)
		if err != bufio.ErrBufferFull {
			lr.valid = lr.utf8.end()
			return lr.line, err
		}
	}
}

// utf8Stream checks that bytes written in pieces are UTF-8, a rune possibly split between them.
type utf8Stream struct {
	invalid bool
	pending []byte // the start of a rune split at the end of the last piece
}

func (u *utf8Stream) write(b []byte) {
	if u.invalid {
		return
	}
	for len(u.pending) > 0 && len(b) > 0 && !utf8.FullRune(u.pending) {
		u.pending, b = append(u.pending, b[0]), b[1:]
	}
	if len(u.pending) > 0 {
		if !utf8.FullRune(u.pending) {
			return // b ran out: the rune continues in the next piece
		}
		if r, n := utf8.DecodeRune(u.pending); r == utf8.RuneError && n == 1 || n != len(u.pending) {
			u.invalid = true
			return
		}
		u.pending = u.pending[:0]
	}
	// Keep aside a rune started within the last UTFMax-1 bytes that does not end in b.
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				u.pending = append(u.pending, b[i:]...)
				b = b[:i]
			}
			break
		}
	}
	u.invalid = !utf8.Valid(b)
}

// end reports whether everything written was UTF-8.
func (u *utf8Stream) end() bool { return !u.invalid && len(u.pending) == 0 }

// parser is the state of one pass over a log.
type parser struct {
	report queue.Report
	// inDetails is set after a message line: tab-led lines that follow continue it.
	inDetails bool
	// current is the index in report.Messages of the message being continued, or -1 when that
	// message is not stored (a status line, a retryable tag, a stage line, a message over max).
	current int
	// max is how many messages of each severity are stored; seen counts them all, by severity
	// (the index in severities).
	max  int
	seen [len(severities)]int
	// names gives the fields their strings (field).
	names *interner
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
		if p.keep(queue.SeverityInfo) {
			p.report.Messages = append(p.report.Messages, queue.Message{
				Severity: queue.SeverityInfo,
				Category: "loaded_file",
				What:     p.field(line[nameStart:end], maxLoadedNameBytes),
				Details:  p.field(line[pathStart:end], queue.MaxDetailsBytes),
			})
		}
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

// message handles one parsed message line: the status line, the retryable tag and the worker's
// stage line set the report, anything else is stored.
func (p *parser) message(severityWord, category, what, details []byte) {
	severity := severityOf(severityWord)
	if severity == queue.SeverityFatal && string(category) == "invalid" {
		severity, category, what = queue.SeverityInvalid, what, []byte("all")
	}
	m := queue.Message{
		Severity: severity,
		Category: p.field(category, queue.MaxCategoryBytes),
		What:     p.field(what, queue.MaxWhatBytes),
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
	case m.Severity == queue.SeverityInfo && m.Category == queue.StageLineCategory && m.What == queue.StageLineWhat:
		// The worker's stage line (docs/stages.md#the-stage-line): timings, not a message.
		if p.report.Stages == nil {
			st := queue.NoStages()
			p.report.Stages = &st
		}
		queue.ParseStageLine(string(details[:min(len(details), 256)]), p.report.Stages)
		return
	}
	if p.keep(severity) {
		m.Details = p.field(details, queue.MaxDetailsBytes) // the long field: only for a message kept
		p.report.Messages = append(p.report.Messages, m)
		p.current = len(p.report.Messages) - 1
	}
}

// keep counts a message of severity and reports whether it is to be stored: fewer than max of
// its severity are stored so far.
func (p *parser) keep(severity queue.Severity) bool {
	i := 0
	for i < len(severities)-1 && severities[i] != severity {
		i++
	}
	p.seen[i]++
	return p.seen[i] <= p.max
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
	// The usual spellings first, without the lower-casing (and its copy) of queue.SeverityOf.
	switch string(word) {
	case "Info", "info":
		return queue.SeverityInfo
	case "Warning", "warning":
		return queue.SeverityWarning
	case "Error", "error":
		return queue.SeverityError
	case "Fatal", "fatal":
		return queue.SeverityFatal
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

// field is clean(b, limit), as one string each time where b is short and clean already: the
// categories, whats and binding paths of LaTeXML logs repeat from log to log, and a string
// allocated for each was 6% of a replica's CPU (docs/performance.md, "Messages").
func (p *parser) field(b []byte, limit int) string {
	if len(b) < limit && len(b) <= maxInternedBytes && bytes.IndexByte(b, 0) < 0 && utf8.Valid(b) {
		return p.names.intern(b)
	}
	return clean(b, limit)
}

// maxInternedBytes and internSlots bound an interner: strings of at most 128 bytes, in 2,048
// slots (32 KiB of string headers, and the strings). Details that name a line (warnings) are
// seldom repeated: each takes a slot from another string, which is allocated again when next seen.
const (
	maxInternedBytes = 128
	internSlots      = 2048
)

// interner hands out one string for equal bytes, as long as they keep their slot: a table
// indexed by their hash, one string a slot, the last one seen (a map of the same strings cost
// twice as much a lookup, and had to be cleared when full).
type interner struct {
	seed  maphash.Seed
	slots *[internSlots]string
}

func (in *interner) intern(b []byte) string {
	if in.slots == nil {
		in.seed, in.slots = maphash.MakeSeed(), new([internSlots]string)
	}
	slot := &in.slots[maphash.Bytes(in.seed, b)%internSlots]
	if *slot == string(b) { // the comparison converts b without allocating
		return *slot
	}
	*slot = string(b)
	return *slot
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
