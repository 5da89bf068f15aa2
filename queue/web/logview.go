package web

import (
	"archive/zip"
	"bufio"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/cortexq/cortexq/queue/cortexlog"
	"github.com/cortexq/cortexq/queue/text"
)

// The log page's bounds (docs/web.md#hostile-results): it shows the first logHeadLines lines of
// cortex.log and the last logTailLines, each at most logLineHTML bytes of HTML (then a marker),
// and reads at most logScanBytes of the log looking for its end.
const (
	logHeadLines = 500
	logTailLines = 20
	logLineHTML  = 2048
	logScanBytes = 16 << 20
)

// logLine is a line of the log page: its number and its text, printable and cut.
type logLine struct {
	N    int64
	Text string
}

// logView is the log page's data.
type logView struct {
	ID         int64
	Missing    bool // the result archive holds no cortex.log
	Head, Tail []logLine
	Lines      int64 // the lines read
	Hidden     int64 // of those, the ones between the head and the tail, not shown
	CutLines   int   // the lines shown cut
	Size       int64 // the log's size, as the archive says
	Read       int64 // the bytes read
	Partial    bool  // reading stopped at logScanBytes, before the end
	Late       bool  // reading stopped at the page's deadline, before the end
	Deadline   time.Duration
}

// The bounds and the hidden lines, for the page's notes.
func (v logView) HeadLines() int64  { return logHeadLines }
func (v logView) TailLines() int    { return logTailLines }
func (v logView) LineHTML() int64   { return logLineHTML }
func (v logView) ScanBytes() int64  { return logScanBytes }
func (v logView) HiddenFrom() int64 { return int64(len(v.Head)) + 1 }
func (v logView) HiddenTo() int64   { return int64(len(v.Head)) + v.Hidden }

// rawLine is a line as read: its first logLineHTML bytes at most, and its length.
type rawLine struct {
	n     int64
	text  []byte
	total int64
}

// shown is the line as the page shows it.
func (l rawLine) shown(v *logView) logLine {
	t, cut := clipPrefix(text.PrintableLines, logLineHTML, string(l.text), l.total)
	if cut {
		v.CutLines++
	}
	return logLine{N: l.n, Text: t}
}

// readLog reads a log into v: line by line through a 64 KiB buffer, keeping of each line its
// first logLineHTML bytes, the first logHeadLines lines and the last logTailLines; it stops at
// logScanBytes or at the deadline. Its work grows with the bytes read, its memory with the lines
// shown.
func readLog(r io.Reader, d *deadline, v *logView) {
	br := bufio.NewReaderSize(r, 64<<10)
	tail := make([]rawLine, logTailLines) // a ring of the last lines, line n at n%logTailLines
	cur := rawLine{text: make([]byte, 0, logLineHTML)}
	for i := 0; ; i++ {
		if v.Read >= logScanBytes {
			v.Partial = true
			break
		}
		if i%64 == 0 && d.Passed() {
			v.Late = true
			break
		}
		frag, err := br.ReadSlice('\n')
		v.Read += int64(len(frag))
		cur.total += int64(len(frag))
		cur.text = append(cur.text, frag[:min(len(frag), cap(cur.text)-len(cur.text))]...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if cur.total > 0 {
			v.Lines++
			cur.n = v.Lines
			endLine(&cur, len(frag) > 0 && frag[len(frag)-1] == '\n')
			if len(v.Head) < logHeadLines {
				v.Head = append(v.Head, cur.shown(v))
			} else {
				t := &tail[cur.n%logTailLines]
				t.n, t.text, t.total = cur.n, append(t.text[:0], cur.text...), cur.total
			}
		}
		cur.text, cur.total = cur.text[:0], 0
		if err != nil { // the end, or a read error: the page shows what was read
			break
		}
	}
	first := int64(len(v.Head)) + 1
	for n := max(first, v.Lines-logTailLines+1); n <= v.Lines; n++ {
		v.Tail = append(v.Tail, tail[n%logTailLines].shown(v))
	}
	v.Hidden = v.Lines - int64(len(v.Head)) - int64(len(v.Tail))
}

// endLine drops a line's end ("\n" or "\r\n") from its text and its length.
func endLine(l *rawLine, newline bool) {
	if !newline {
		return
	}
	l.total--
	whole := int64(len(l.text)) == l.total+1
	if whole {
		l.text = l.text[:len(l.text)-1]
		if n := len(l.text); n > 0 && l.text[n-1] == '\r' {
			l.text, l.total = l.text[:n-1], l.total-1
		}
	}
}

// logMember is the result archive's cortex.log, or nil.
func logMember(zr *zip.Reader) *zip.File {
	for _, m := range zr.File {
		if m.Name == cortexlog.LogName {
			return m
		}
	}
	return nil
}

// taskLog is the log page: a bounded view of the result's cortex.log (readLog), with a link to
// the whole of it (rawLog).
func (s *Server) taskLog(r *http.Request) (view, error) {
	h, a, err := s.taskArchives(r)
	if err != nil {
		return view{}, err
	}
	zr, f, err := openResult(a)
	if err != nil {
		return view{}, httpError{code: http.StatusNotFound, msg: "task " + strconv.FormatInt(h.ID, 10) + ": no result archive readable here"}
	}
	defer f.Close()
	v := logView{ID: h.ID, Deadline: s.cfg.PageDeadline}
	m := logMember(zr)
	if m == nil {
		v.Missing = true
	} else {
		rc, err := m.Open()
		if err != nil {
			return view{}, httpError{code: http.StatusNotFound, msg: "cortex.log: " + err.Error()}
		}
		readLog(rc, pageDeadline(r), &v)
		rc.Close()
		v.Size = int64(min(m.UncompressedSize64, 1<<62))
	}
	return view{Page: "log", Title: "cortex.log of task " + strconv.FormatInt(h.ID, 10), Data: v}, nil
}

// rawLog serves the result's cortex.log whole, as a text attachment: the log page's link to
// what it does not show.
func (s *Server) rawLog(w http.ResponseWriter, r *http.Request) {
	h, a, err := s.taskArchives(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	zr, f, err := openResult(a)
	if err != nil {
		s.fail(w, r, httpError{code: http.StatusNotFound, msg: "task " + strconv.FormatInt(h.ID, 10) + ": no result archive readable here"})
		return
	}
	defer f.Close()
	m := logMember(zr)
	if m == nil {
		s.fail(w, r, httpError{code: http.StatusNotFound, msg: "task " + strconv.FormatInt(h.ID, 10) + ": the result archive holds no cortex.log"})
		return
	}
	rc, err := m.Open()
	if err != nil {
		s.fail(w, r, httpError{code: http.StatusNotFound, msg: "cortex.log: " + err.Error()})
		return
	}
	defer rc.Close()
	longWrite(w)
	name := "task-" + strconv.FormatInt(h.ID, 10) + "-cortex.log"
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	_, _ = io.Copy(w, rc)
}
