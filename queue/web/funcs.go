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
}

// clip is s made printable (text.Printable: control and bidirectional characters escaped) and
// cut so that, escaped for HTML, it takes at most n bytes; a cut text ends with a note of its
// whole length. A page of a thousand hostile messages stays a few MB however long they are.
func clip(n int, s string) string {
	raw := s
	if len(raw) > n {
		raw = raw[:n] // escaped, never shorter than its source: n bytes of it are enough
	}
	shown, cut := htmlCut(text.Printable(raw), n)
	if !cut && len(raw) == len(s) {
		return shown
	}
	return shown + " … [cut: " + commas(int64(len(s))) + " bytes in all]"
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
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	var groups []string
	for len(s) > 3 {
		groups = append([]string{s[len(s)-3:]}, groups...)
		s = s[:len(s)-3]
	}
	return sign + strings.Join(append([]string{s}, groups...), ",")
}

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
