package latexml

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Bounds of the cortex.log MapLog writes, so that its status line always fits within what the
// dispatcher reads (64 MiB by default) whatever LaTeXML logged.
const (
	// maxMappedBytes is the most bytes of LaTeXML lines copied into cortex.log.
	maxMappedBytes = 16 << 20
	// maxLineBytes is the most bytes kept of one line.
	maxLineBytes = 4 << 10
	// maxContinuations is the most tab-led detail lines kept after one message.
	maxContinuations = 32
)

// Conversion levels of a Status:conversion:N line, as LaTeXML and CorTeX number them.
const (
	LevelNone    = -1 // no message and no status line seen
	LevelOK      = 0
	LevelWarning = 1
	LevelError   = 2
	LevelFatal   = 3
	LevelInvalid = 4
)

// LogSummary is what MapLog saw in a LaTeXML log.
type LogSummary struct {
	// Status is the N of LaTeXML's last Status:conversion:N line, or LevelNone.
	Status int
	// Worst is the level of the most severe message copied (LevelOK for Info), or LevelNone.
	Worst int
	// Messages counts the message lines copied (Loading lines not included).
	Messages int
	// Cut says the log went past maxMappedBytes and the rest was left out.
	Cut bool
}

// Level is the conversion level the log stands for: LaTeXML's own status line when it wrote
// one, else the level of its most severe message (LevelOK when it logged none).
func (s LogSummary) Level() int {
	if s.Status != LevelNone {
		return s.Status
	}
	return max(s.Worst, LevelOK)
}

// MapLog copies a LaTeXML log (latexmlc --log) from r to w as cortex.log lines, CorTeX's way:
//
//   - a message line Severity:category:what details, severity Info, Warning, Error or Fatal
//     (any case), is copied as it is, and so are up to maxContinuations tab-led lines after it
//     (its location and context, which the dispatcher appends to its details);
//   - "(Loading path/name..." and "(Processing definitions path/name..." lines are copied (the
//     dispatcher records them as Info loaded_file messages);
//   - Status:conversion:N lines are not copied but read: the caller writes the one status line,
//     last, from LogSummary.Level;
//   - everything else (progress, timings, math parsing statistics) is left out.
//
// Lines are cut to maxLineBytes; after maxMappedBytes the rest of the log is left out and
// LogSummary.Cut is set. A non-empty scratch is a directory (the unpacked source's) whose path,
// with its slash, is cut from the lines copied: messages then read the same whichever worker
// converted the paper. The error is r's or w's.
func MapLog(r io.Reader, w io.Writer, scratch string) (LogSummary, error) {
	var prefix []byte
	if scratch != "" {
		prefix = []byte(strings.TrimSuffix(scratch, "/") + "/")
	}
	s := LogSummary{Status: LevelNone, Worst: LevelNone}
	br := bufio.NewReaderSize(r, 64<<10)
	var written int64
	inMessage, continuations := false, 0
	var line []byte
	for {
		var err error
		line, err = readLine(br, line[:0])
		if err != nil && err != io.EOF {
			return s, fmt.Errorf("read the latexml log: %w", err)
		}
		if len(line) > 0 {
			keep := false
			switch {
			case line[0] == '\t':
				if inMessage && continuations < maxContinuations {
					keep = true
					continuations++
				}
			default:
				inMessage, continuations = false, 0
				if level, n, isStatus, ok := messageLevel(line); ok {
					if isStatus {
						s.Status = n
						break
					}
					keep, inMessage = true, true
					s.Messages++
					s.Worst = max(s.Worst, level)
				} else if bytes.HasPrefix(line, []byte("(Loading ")) || bytes.HasPrefix(line, []byte("(Processing definitions ")) {
					keep = true
				}
			}
			if keep {
				if prefix != nil {
					line = bytes.ReplaceAll(line, prefix, nil)
				}
				if written+int64(len(line))+1 > maxMappedBytes {
					s.Cut = true
					return s, nil
				}
				if _, werr := w.Write(append(line, '\n')); werr != nil {
					return s, fmt.Errorf("write cortex.log: %w", werr)
				}
				written += int64(len(line)) + 1
			}
		}
		if err == io.EOF {
			return s, nil
		}
	}
}

// readLine reads one line without its line end into buf, keeping at most maxLineBytes of it.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if room := maxLineBytes - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		buf = bytes.TrimRight(buf, "\r\n")
		if err == io.EOF && len(chunk) == 0 && len(buf) == 0 {
			return buf, io.EOF
		}
		return buf, err
	}
}

// messageLevel reads a message line Severity:category:what[ details]: its level, and whether it
// is a status line (Status or Info, category conversion) with its N.
func messageLevel(line []byte) (level, n int, isStatus, ok bool) {
	sev, rest, found := bytes.Cut(line, []byte(":"))
	if !found || len(sev) == 0 || bytes.IndexByte(sev, ' ') >= 0 {
		return 0, 0, false, false
	}
	cat, rest, found := bytes.Cut(rest, []byte(":"))
	if !found || len(cat) == 0 || bytes.IndexByte(cat, ' ') >= 0 || len(rest) == 0 || rest[0] == ' ' {
		return 0, 0, false, false
	}
	what, _, _ := bytes.Cut(rest, []byte(" "))
	switch {
	case bytes.EqualFold(sev, []byte("status")) || bytes.EqualFold(sev, []byte("info")) && string(cat) == "conversion":
		if string(cat) != "conversion" {
			return 0, 0, false, false
		}
		v, err := strconv.Atoi(string(what))
		if err != nil || v < LevelOK || v > LevelInvalid {
			v = LevelFatal // as the dispatcher reads a status it cannot parse
		}
		return 0, v, true, true
	case bytes.EqualFold(sev, []byte("info")):
		return LevelOK, 0, false, true
	case bytes.EqualFold(sev, []byte("warning")):
		return LevelWarning, 0, false, true
	case bytes.EqualFold(sev, []byte("error")):
		return LevelError, 0, false, true
	case bytes.EqualFold(sev, []byte("fatal")):
		if string(cat) == "invalid" {
			return LevelInvalid, 0, false, true
		}
		return LevelFatal, 0, false, true
	}
	return 0, 0, false, false
}
