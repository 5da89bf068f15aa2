package web

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/text"
)

// funcs are the templates' helpers. None returns template.HTML: everything they make is escaped
// by html/template like any other value.
var funcs = template.FuncMap{
	"commas":  commas,
	"percent": percent,
	"stamp":   stamp,
	"status":  func(s queue.Status) string { return statusName(s) },
	"link":    link,
	"seconds": func(a time.Time, b *time.Time) string {
		if b == nil {
			return "-"
		}
		return strconv.FormatFloat(b.Sub(a).Seconds(), 'f', 3, 64)
	},
	"deref": func(p *queue.Status) string {
		if p == nil {
			return "-"
		}
		return statusName(*p)
	},
	"cls":  cssName,
	"task": func(id int64) string { return "/task/" + strconv.FormatInt(id, 10) },
	"join": strings.Join,
	"show": text.Printable,
	"clip": clip,
	// clipLines is clip keeping line breaks (and tabs): a message's details.
	"clipLines": func(n int, s string) string { return clipWith(text.PrintableLines, n, s) },
	// statusOf names a status stored as a number.
	"statusOf": func(n int16) string { return statusName(queue.Status(n)) },
	"plural":   plural,
	"sub":      func(a int32, b int32) int32 { return a - b },
	"ordinal":  ordinal,
}

// plural writes n with its noun: "1 task", "2 tasks", "1,000 tasks".
func plural(n any, one, many string) string {
	var v int64
	switch n := n.(type) {
	case int:
		v = int64(n)
	case int64:
		v = n
	case int32:
		v = int64(n)
	}
	if v == 1 {
		return "1 " + one
	}
	return commas(v) + " " + many
}

// clip is s made printable (text.Printable: control and bidirectional characters escaped) and
// cut so that, escaped for HTML, it takes at most n bytes; a cut text ends with a note of its
// whole length. A page of a thousand hostile messages stays a few MB however long they are.
func clip(n int, s string) string { return clipWith(text.Printable, n, s) }

// clipWith is clip with printable as the way to make s printable.
func clipWith(printable func(string) string, n int, s string) string {
	// Escaped, a text is never shorter than its source: n bytes of it are enough.
	shown, _ := clipPrefix(printable, n, s[:min(len(s), n)], int64(len(s)))
	return shown
}

// clipPrefix is clipWith of a text of which prefix is at hand (at least its first n bytes, or
// all of it), total bytes in all: a long line of a log read in pieces. It reports whether it cut.
func clipPrefix(printable func(string) string, n int, prefix string, total int64) (string, bool) {
	if int64(len(prefix)) < total {
		// Cut within a character: its first bytes would show as bytes that are not UTF-8.
		for i := len(prefix) - 1; i >= max(0, len(prefix)-utf8.UTFMax); i-- {
			if utf8.RuneStart(prefix[i]) {
				if !utf8.FullRuneInString(prefix[i:]) {
					prefix = prefix[:i]
				}
				break
			}
		}
	}
	shown, cut := htmlCut(printable(prefix), n)
	if !cut && int64(len(prefix)) == total {
		return shown, false
	}
	return shown + " … [cut: " + commas(total) + " bytes in all]", true
}

// htmlCut cuts s at a rune boundary so that, as html/template escapes it, it takes at most
// budget bytes; it reports whether it cut.
func htmlCut(s string, budget int) (string, bool) {
	used := 0
	for i, r := range s {
		w := utf8.RuneLen(r)
		switch r {
		case '<', '>':
			w = 4 // &lt;
		case '&', '"', '\'', '+':
			w = 5 // &amp; &#34; &#39; &#43;
		case 0:
			w = 3 // U+FFFD
		}
		if used+w > budget {
			return s[:i], true
		}
		used += w
	}
	return s, false
}

// commas writes n with a comma every three digits: 1,234,567.
var commas = text.Commas

// percent is n of total with one decimal, "-" of nothing.
func percent(n, total int64) string {
	if total <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}

// stamp writes a database time (a time.Time or *time.Time) in UTC to the second; nil is "-".
func stamp(v any) string {
	var t time.Time
	switch v := v.(type) {
	case time.Time:
		t = v
	case *time.Time:
		if v == nil {
			return "-"
		}
		t = *v
	default:
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// ordinal writes n as "1st run", "2nd run", ...: a task's own count of its runs.
func ordinal(n int32) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(int(n)) + suffix + " run"
}
