package latexml

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// PreferredMainNames are the file names FindMain prefers, in this order, among several .tex files
// that each declare a document class.
var PreferredMainNames = []string{"main.tex", "ms.tex", "paper.tex", "article.tex"}

// classScanBytes is how much of each .tex file FindMain reads looking for a document class.
const classScanBytes = 1 << 20

// FindMain picks the main TeX file of an unpacked source tree and returns its path relative to
// dir (slash-separated). The rule, in order:
//
//  1. The candidates are the files named *.tex (any case) that declare a document class: a line
//     of their first MiB holds \documentclass or \documentstyle before any % comment.
//  2. One candidate: it. Several: the first of PreferredMainNames (main.tex, ms.tex, paper.tex,
//     article.tex; names compared without case) among them, then the one nearest the top of
//     the tree, then the first by path.
//  3. No candidate but exactly one .tex file: that file (plain TeX, or a class set elsewhere).
//  4. Otherwise the archive is an *InvalidError: no_tex when it holds no .tex file at all,
//     no_main_tex when it holds several and none declares a class.
func FindMain(dir string) (string, error) {
	var texs, mains []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || !strings.EqualFold(filepath.Ext(p), ".tex") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		texs = append(texs, rel)
		ok, err := declaresClass(p)
		if err != nil {
			return err
		}
		if ok {
			mains = append(mains, rel)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("find the main .tex: %w", err)
	}
	switch {
	case len(mains) > 0:
		slices.SortFunc(mains, compareMains)
		return mains[0], nil
	case len(texs) == 1:
		return texs[0], nil
	case len(texs) == 0:
		return "", invalidf(InvalidNoTeX, "the source archive holds no .tex file")
	default:
		return "", invalidf(InvalidNoMain, "the source archive holds %d .tex files and none declares a \\documentclass", len(texs))
	}
}

// compareMains orders main-file candidates: preferred names first, then shallower paths, then
// by path.
func compareMains(a, b string) int {
	rank := func(p string) int {
		for i, n := range PreferredMainNames {
			if strings.EqualFold(path.Base(p), n) {
				return i
			}
		}
		return len(PreferredMainNames)
	}
	if c := rank(a) - rank(b); c != 0 {
		return c
	}
	if c := strings.Count(a, "/") - strings.Count(b, "/"); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// declaresClass reports whether a line in the first classScanBytes of the file at p holds
// \documentclass or \documentstyle outside a comment.
func declaresClass(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	r := bufio.NewReader(io.LimitReader(f, classScanBytes))
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A very long line: look at what was read, and go on with the rest as new lines.
			err = nil
		}
		if hasClass(line) {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// hasClass reports whether line declares a document class before any comment.
func hasClass(line []byte) bool {
	for i := 0; i < len(line); i++ {
		if line[i] == '%' && (i == 0 || line[i-1] != '\\') {
			line = line[:i]
			break
		}
	}
	return bytes.Contains(line, []byte(`\documentclass`)) || bytes.Contains(line, []byte(`\documentstyle`))
}
