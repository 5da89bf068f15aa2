// Package text keeps text from workers and users harmless where people read it and where it is
// stored: Printable escapes what a terminal or a page would act on or hide (the CLI's tables and
// the web dashboard's pages both use it), and CheckInput refuses a parameter that PostgreSQL
// cannot store as text (the CLI's flags and the dashboard's query and form values both go through
// it).
package text

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Printable escapes what a terminal would act on, or a page would use to reorder or hide text, in
// text from the database or from workers (a worker's log, an entry, a name): control characters
// (C0, DEL, C1), other unprintable runes such as the bidirectional overrides, marks and isolates
// (U+202A–202E, U+200E/F, U+2066–2069), and bytes that are not UTF-8, each as its Go escape (\x1b,
// \n, \u202e, \xff). Printable text, backslashes included, is left as it is.
func Printable(s string) string { return printable(s, false) }

// PrintableLines is Printable for text of several lines (a log): it leaves newlines and tabs as
// they are.
func PrintableLines(s string) string { return printable(s, true) }

func printable(s string, lines bool) string {
	keep := func(r rune) bool { return strconv.IsPrint(r) || lines && (r == '\n' || r == '\t') }
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !keep(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case keep(r):
			b.WriteString(s[:n])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}

// CheckInput refuses a parameter's value that is not text PostgreSQL can store: bytes that are
// not UTF-8, or a NUL. The error names the parameter and where the first bad byte is; nothing
// else about the value is repeated.
func CheckInput(name, value string) error {
	if i := strings.IndexByte(value, 0); i >= 0 {
		return fmt.Errorf("%s: holds a NUL byte (at byte %d): give text without it", name, i)
	}
	if !utf8.ValidString(value) {
		i := 0
		for i < len(value) {
			r, n := utf8.DecodeRuneInString(value[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("%s: not UTF-8 text (byte 0x%02x at byte %d)", name, value[i], i)
	}
	return nil
}

// Commas writes n with a comma every three digits, as the CLI's tables and the dashboard show
// counts: 1,234,567.
func Commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	b.WriteString(sign)
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
