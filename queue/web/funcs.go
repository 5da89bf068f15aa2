package web

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue"
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
