package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/cortexq/cortexq"

// repoPathRE is a path into the repository written in a code span of a markdown page:
// `queue/lease/claim.go`, `cmd/cortexq`, `scripts/test`.
var repoPathRE = regexp.MustCompile("`((?:cmd|queue|internal|worker|sql|migrations|scripts|docs|\\.ci)/[A-Za-z0-9_./-]*[A-Za-z0-9_])`")

// TestDocsCodeReferencesResolve: every path into the repository that README.md or a docs page
// names in a code span exists (a file or a folder), so a moved file cannot leave a signpost
// pointing at nothing.
func TestDocsCodeReferencesResolve(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	pages = append([]string{filepath.Join(repoRoot, "README.md")}, pages...)
	var broken []string
	refs := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range repoPathRE.FindAllStringSubmatch(line, -1) {
				refs++
				if msg := repoPathMissing(repoRoot, m[1]); msg != "" {
					broken = append(broken, fmt.Sprintf("%s:%d: %s", rel(page), i+1, msg))
				}
			}
		}
	}
	require.Greater(t, refs, 40, "paths named in README.md and docs/*.md")
	if len(broken) > 0 {
		t.Errorf("paths in the docs that do not exist:\n%s", strings.Join(broken, "\n"))
	}
}

// repoPathMissing says why path (relative to root) names nothing, or "" when it exists. A path
// with a glob (`sql/*.sql`) needs one match.
func repoPathMissing(root, path string) string {
	if strings.ContainsAny(path, "*?[") {
		m, err := filepath.Glob(filepath.Join(root, path))
		if err != nil || len(m) == 0 {
			return path + ": no file matches"
		}
		return ""
	}
	if _, err := os.Stat(filepath.Join(root, path)); err != nil {
		return path + ": no such file or folder"
	}
	return ""
}

// docLinkRE is a Go doc link to another package's symbol: [pkg.Name] or [pkg.Type.Method].
var docLinkRE = regexp.MustCompile(`\[([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Za-z][A-Za-z0-9_]*))?\]`)

// ownLinkRE is a Go doc link to a method or field of the file's own package: [Type.Method].
var ownLinkRE = regexp.MustCompile(`\[([A-Z][A-Za-z0-9_]*)\.([A-Za-z][A-Za-z0-9_]*)\]`)

// TestGoDocLinksResolve: every Go doc link ([pkg.Symbol], [pkg.Type.Method]) in a comment of
// this module's code, to a package of this module the file imports, names a symbol that
// package declares, and so does every [Type.Method] to a type of the file's own package: a
// rename cannot leave a comment pointing at nothing.
func TestGoDocLinksResolve(t *testing.T) {
	decls := map[string]map[string]bool{} // package folder → declared names, methods as Type.Method
	links := 0
	var broken []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" || (strings.HasPrefix(n, ".") && path != repoRoot) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		found, bad, err := checkDocLinks(path, decls)
		links += found
		broken = append(broken, bad...)
		return err
	})
	require.NoError(t, err)
	require.Greater(t, links, 20, "doc links to this module's packages")
	if len(broken) > 0 {
		t.Errorf("doc links that do not resolve:\n%s", strings.Join(broken, "\n"))
	}
}

// checkDocLinks checks the doc links of one Go file; decls caches each package's names.
func checkDocLinks(path string, decls map[string]map[string]bool) (links int, broken []string, err error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return 0, nil, err
	}
	imports := map[string]string{} // name in the file → folder in the repository
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p != modulePath && !strings.HasPrefix(p, modulePath+"/") {
			continue
		}
		name := filepath.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = filepath.Join(repoRoot, strings.TrimPrefix(strings.TrimPrefix(p, modulePath), "/"))
	}
	var own map[string]bool // the file's own package's names (production files only)
	if !strings.HasSuffix(path, "_test.go") {
		if own, err = packageNames(filepath.Dir(path), decls); err != nil {
			return 0, nil, err
		}
	}
	for _, cg := range f.Comments {
		for _, m := range ownLinkRE.FindAllStringSubmatch(cg.Text(), -1) {
			if !own[m[1]] {
				continue // not a type of this package: plain text
			}
			links++
			if !own[m[1]+"."+m[2]] {
				broken = append(broken, fmt.Sprintf("%s:%d: %s", rel(path), fset.Position(cg.Pos()).Line, m[0]))
			}
		}
		for _, m := range docLinkRE.FindAllStringSubmatch(cg.Text(), -1) {
			dir, ok := imports[m[1]]
			if !ok {
				continue // another module's package, or not a link to a package
			}
			links++
			names, err := packageNames(dir, decls)
			if err != nil {
				return links, broken, err
			}
			want := m[2]
			if m[3] != "" {
				want += "." + m[3]
			}
			if !names[want] {
				broken = append(broken, fmt.Sprintf("%s:%d: %s", rel(path), fset.Position(cg.Pos()).Line, m[0]))
			}
		}
	}
	return links, broken, nil
}

// packageNames lists what the package in dir declares at top level (non-test files): its
// types, functions, variables and constants, and Type.Method / Type.Field for its types.
func packageNames(dir string, decls map[string]map[string]bool) (map[string]bool, error) {
	if names, ok := decls[dir]; ok {
		return names, nil
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			addDeclNames(d, names)
		}
	}
	decls[dir] = names
	return names, nil
}

// addDeclNames adds the names one declaration brings to names.
func addDeclNames(d ast.Decl, names map[string]bool) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil || len(d.Recv.List) == 0 {
			names[d.Name.Name] = true
			return
		}
		names[receiverType(d.Recv.List[0].Type)+"."+d.Name.Name] = true
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				names[s.Name.Name] = true
				if st, ok := s.Type.(*ast.StructType); ok {
					for _, fld := range st.Fields.List {
						for _, n := range fld.Names {
							names[s.Name.Name+"."+n.Name] = true
						}
					}
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					names[n.Name] = true
				}
			}
		}
	}
}

// receiverType is the name of a method's receiver type: T of T, *T, T[K] or *T[K].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// TestCodeReferenceCheckersFindBrokenOnes: the checkers above tell a broken reference from a
// good one.
func TestCodeReferenceCheckersFindBrokenOnes(t *testing.T) {
	require.Empty(t, repoPathMissing(repoRoot, "queue/lease/claim.go"))
	require.Empty(t, repoPathMissing(repoRoot, "sql/*.sql"))
	require.NotEmpty(t, repoPathMissing(repoRoot, "queue/lease/doc-gone.go"))
	require.NotEmpty(t, repoPathMissing(repoRoot, "queue/nowhere/*.go"))
	require.Equal(t, [][]string{{"`queue/lease/claim.go`", "queue/lease/claim.go"}},
		repoPathRE.FindAllStringSubmatch("see `queue/lease/claim.go`, not queue/x.go or `a/b`", -1))

	dir := t.TempDir()
	src := "package x\n\nimport \"github.com/cortexq/cortexq/queue/lease\"\n\n" +
		"// Uses [lease.Store.ReapAll], [lease.Result.HandedOut] and [lease.Store.FoldReports];\n" +
		"// [T.Good], [T.Gone] and [Untyped.Text].\n" +
		"var _ lease.Store\n\ntype T struct{}\n\nfunc (T) Good() {}\n"
	file := filepath.Join(dir, "x.go")
	require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
	links, broken, err := checkDocLinks(file, map[string]map[string]bool{})
	require.NoError(t, err)
	require.Equal(t, 5, links)
	require.Len(t, broken, 2)
	require.Contains(t, broken[0], "[T.Gone]")
	require.Contains(t, broken[1], "[lease.Store.FoldReports]")
}
