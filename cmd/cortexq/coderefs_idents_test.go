package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// commentIdentRE is a Go identifier a comment names in a code span or in parentheses:
// `coldTask`, (trimMemory), (lease.Store.Reap). Only names with a hump (a lower-case letter
// followed by an upper-case one) count: plain words in parentheses are not identifiers.
var commentIdentRE = regexp.MustCompile("(?:`|\\()((?:[A-Za-z_][A-Za-z0-9_]*\\.)*[A-Za-z_][A-Za-z0-9_]*)(?:`|\\))")

// notGoNames are words with a hump that comments name and that are not Go: a /proc field, TeX.
var notGoNames = map[string]bool{"VmHWM": true, "TeX": true}

// humpRE tells an identifier from a word: a lower-case letter or digit followed by an upper-case one.
var humpRE = regexp.MustCompile(`[a-z0-9][A-Z]`)

// TestCommentIdentifiersResolve: every Go identifier a comment of this module names in a code
// span or in parentheses (`coldTask`, (trimMemory)) is a name some Go file of the module uses
// or declares, so a rename or a removal cannot leave a comment naming what no longer exists.
func TestCommentIdentifiersResolve(t *testing.T) {
	idents, comments := map[string]bool{}, map[string][]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" || n == "node_modules" || (strings.HasPrefix(n, ".") && path != repoRoot) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return collectIdents(path, idents, comments)
	})
	require.NoError(t, err)
	named := 0
	broken := unresolvedIdents(idents, comments, &named)
	require.Greater(t, named, 100, "identifiers named in comments")
	if len(broken) > 0 {
		t.Errorf("comments naming identifiers no Go file has:\n%s", strings.Join(broken, "\n"))
	}
}

// collectIdents adds every identifier of the Go file at path to idents, and each comment's
// text to comments under its position.
func collectIdents(path string, idents map[string]bool, comments map[string][]string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			idents[id.Name] = true
		}
		return true
	})
	for _, cg := range f.Comments {
		at := fmt.Sprintf("%s:%d", rel(path), fset.Position(cg.Pos()).Line)
		comments[at] = append(comments[at], cg.Text())
	}
	return nil
}

// unresolvedIdents lists the comments' identifiers (each part of a dotted one) that are not in
// idents, counting in named the identifiers checked.
func unresolvedIdents(idents map[string]bool, comments map[string][]string, named *int) []string {
	var broken []string
	for at, texts := range comments {
		for _, text := range texts {
			for _, m := range commentIdentRE.FindAllStringSubmatch(text, -1) {
				if !humpRE.MatchString(m[1]) {
					continue
				}
				*named++
				for _, part := range strings.Split(m[1], ".") {
					if !idents[part] && !notGoNames[part] && humpRE.MatchString(part) {
						broken = append(broken, fmt.Sprintf("%s: %s", at, m[0]))
						break
					}
				}
			}
		}
	}
	return broken
}

// TestCommentIdentifierCheckerFindsGoneOnes: the checker tells a gone name from one in use.
func TestCommentIdentifierCheckerFindsGoneOnes(t *testing.T) {
	idents := map[string]bool{"trimMemory": true, "Store": true, "coldTask": true}
	comments := map[string][]string{"x.go:1": {
		"frees it (trimMemory), then (mallocTrim); see `coldTask` and `withAnswers`, (Store.readBeneath) (a word) (TODO)",
	}}
	named := 0
	broken := unresolvedIdents(idents, comments, &named)
	require.Equal(t, 5, named)
	require.Equal(t, []string{"x.go:1: (mallocTrim)", "x.go:1: `withAnswers`", "x.go:1: (Store.readBeneath)"}, broken)
}
