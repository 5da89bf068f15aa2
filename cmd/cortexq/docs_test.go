package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

const repoRoot = "../.."

// TestDocsLinksResolve: every relative link in README.md and docs/*.md leads to a file that
// exists and, with an #anchor into a markdown file, to one of its headings (GitHub's slugs);
// so does every pointer to a docs page (docs/<page>.md, with or without an anchor) in the
// comments of the .go and .sql files.
func TestDocsLinksResolve(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	pages = append([]string{filepath.Join(repoRoot, "README.md")}, pages...)

	var broken []string
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, l := range markdownLinks(string(b)) {
			links++
			if msg := resolveLink(filepath.Dir(page), l.target, page); msg != "" {
				broken = append(broken, fmt.Sprintf("%s:%d: %s", rel(page), l.line, msg))
			}
		}
	}
	require.Greater(t, links, 40, "links found in README.md and docs/*.md")

	pointers := 0
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "vendor", "testdata", "node_modules":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && path != repoRoot {
				return filepath.SkipDir
			}
			return nil
		}
		marker := map[string]string{".go": "//", ".sql": "--"}[filepath.Ext(path)]
		if marker == "" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			k := strings.Index(line, marker)
			if k < 0 {
				continue
			}
			for _, p := range docPointer.FindAllString(line[k:], -1) {
				pointers++
				if msg := resolveLink(repoRoot, p, path); msg != "" {
					broken = append(broken, fmt.Sprintf("%s:%d: %s", rel(path), i+1, msg))
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, pointers, 5, "pointers to docs/*.md in code comments")
	if len(broken) > 0 {
		t.Errorf("links that do not resolve:\n%s", strings.Join(broken, "\n"))
	}
}

// TestDocsLinkCheckerFindsBrokenLinks: the checker of TestDocsLinksResolve tells a broken link
// or anchor from a good one, and reads GitHub's slugs, code spans and fences as GitHub does.
func TestDocsLinkCheckerFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("# A page\n\n"+
		"## The `serve` command: flags & more\n\n## Notes\n\n## Notes\n\n"+
		"```sh\n# not a heading\n[not a link](nowhere.md)\n```\n"+
		"`[code, not a link](nowhere.md)` and [a link](a.md#notes-1)\n"), 0o644))
	md, err := os.ReadFile(filepath.Join(dir, "a.md"))
	require.NoError(t, err)
	require.Equal(t, []mdLink{{line: 13, target: "a.md#notes-1"}}, markdownLinks(string(md)))

	page := filepath.Join(dir, "a.md")
	for target, ok := range map[string]bool{
		"a.md":                                  true,
		"#a-page":                               true,
		"a.md#the-serve-command-flags--more":    true,
		"a.md#notes":                            true,
		"a.md#notes-1":                          true,
		"a.md#notes-2":                          false,
		"#not-a-heading":                        false,
		"b.md":                                  false,
		"a.md#the-serve-command":                false,
		"https://example.com/x.md#anything":     true,
		"./a.md#a-page":                         true,
		"a.md#A-page":                           false,
		"missing/a.md#a-page":                   false,
		"a.md#the-serve-command-flags--more-xx": false,
	} {
		msg := resolveLink(dir, target, page)
		require.Equal(t, ok, msg == "", "%s: %q", target, msg)
	}
	require.Equal(t, []string{"docs/performance.md#plan-cache", "docs/cli.md"},
		docPointer.FindAllString("// See docs/performance.md#plan-cache. And docs/cli.md.", -1))
}

// docPointer is a pointer into docs/ written in a code comment.
var docPointer = regexp.MustCompile(`docs/[A-Za-z0-9_-]+\.md(#[A-Za-z0-9_-]+)?`)

type mdLink struct {
	line   int
	target string
}

var mdLinkRE = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// markdownLinks returns the targets of the inline links of a markdown text, leaving out fenced
// code blocks and code spans.
func markdownLinks(md string) []mdLink {
	var out []mdLink
	fence := ""
	for i, line := range strings.Split(md, "\n") {
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		for _, m := range mdLinkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, mdLink{line: i + 1, target: m[1]})
		}
	}
	return out
}

// fenceOf returns the fence (``` or ~~~, three or more) a line opens or closes, or "".
func fenceOf(line string) string {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 {
		return ""
	}
	for _, c := range []string{"`", "~"} {
		n := len(s) - len(strings.TrimLeft(s, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// stripCodeSpans removes the code spans of a line: a run of n backticks up to the next run of
// exactly n.
func stripCodeSpans(line string) string {
	var sb strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			sb.WriteString(line)
			return sb.String()
		}
		sb.WriteString(line[:i])
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		rest := line[i+n:]
		end := -1
		for j := 0; j < len(rest); {
			if rest[j] != '`' {
				j++
				continue
			}
			m := len(rest[j:]) - len(strings.TrimLeft(rest[j:], "`"))
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 { // no closing run: the backticks are literal
			sb.WriteString(line[i : i+n])
			line = rest
			continue
		}
		line = rest[end+n:]
	}
}

// resolveLink checks target, a link written in from (a file) and relative to dir. It returns
// what is wrong, or "".
func resolveLink(dir, target, from string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(dir, path)
		if _, err := os.Stat(file); err != nil {
			return fmt.Sprintf("%s: no such file %s", target, rel(file))
		}
	}
	if anchor == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("%s: %v", target, err)
	}
	for _, s := range headingSlugs(string(b)) {
		if s == anchor {
			return ""
		}
	}
	return fmt.Sprintf("%s: no heading of %s has the anchor #%s", target, rel(file), anchor)
}

// headingSlugs returns the anchors GitHub gives the ATX headings of a markdown text: the
// heading's text lowercased, without punctuation but '-' and '_', spaces made '-'; a repeated
// slug gets -1, -2, ...
func headingSlugs(md string) []string {
	var out []string
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(md, "\n") {
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		text, ok := headingText(line)
		if !ok {
			continue
		}
		s := slug(text)
		if n := seen[s]; n > 0 {
			seen[s]++
			s = fmt.Sprintf("%s-%d", s, n)
		} else {
			seen[s] = 1
		}
		out = append(out, s)
	}
	return out
}

var linkInHeading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// headingText returns the text of an ATX heading line (# to ######), links reduced to their text.
func headingText(line string) (string, bool) {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 {
		return "", false
	}
	n := len(s) - len(strings.TrimLeft(s, "#"))
	if n < 1 || n > 6 || (len(s) > n && s[n] != ' ' && s[n] != '\t') {
		return "", false
	}
	text := strings.TrimSpace(s[n:])
	if t := strings.TrimRight(text, "#"); t == "" || strings.HasSuffix(t, " ") {
		text = strings.TrimSpace(t) // a closing sequence
	}
	return linkInHeading.ReplaceAllString(text, "$1"), true
}

func slug(text string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			sb.WriteRune(r)
		case r == ' ':
			sb.WriteByte('-')
		}
	}
	return sb.String()
}

func rel(path string) string {
	if r, err := filepath.Rel(repoRoot, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}
