package archive

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Entry is a source archive found for an import.
type Entry struct {
	// Path is the archive's absolute, clean path.
	Path string
	// Link is set for a walked entry that is a symbolic link (Beneath.Check follows it).
	Link bool
}

// Roots resolves the paths an import walks (directories or single archives) to absolute ones,
// refusing one that does not exist.
func Roots(paths []string) ([]string, error) {
	roots := make([]string, len(paths))
	for i, p := range paths {
		abs, err := filepath.Abs(p)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, pathErr(err))
		}
		roots[i] = abs
	}
	return roots, nil
}

// RootsDir is the deepest directory holding every root (absolute paths from Roots; a root that
// is a file counts as its directory): the path of a corpus made for a walk of them.
func RootsDir(roots []string) string {
	dirs := make([]string, 0, len(roots))
	for _, root := range roots {
		if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
			root = filepath.Dir(root)
		}
		dirs = append(dirs, root)
	}
	if len(dirs) == 0 {
		return ""
	}
	return commonDir(dirs)
}

// WalkSources walks roots (absolute paths from Roots) for source archives: regular files, or
// symbolic links to them, that IsSource takes given the services' names. It calls fn for each as
// it finds it, holding none (memory does not grow with the count), and returns how many *.zip
// files it skipped (result archives). An error of fn ends the walk.
func WalkSources(roots []string, services map[string]bool, fn func(Entry) error) (skipped int, err error) {
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !isFile(path, d) {
				return nil
			}
			if IsSource(filepath.Base(path), services) {
				return fn(Entry{Path: path, Link: d.Type()&fs.ModeSymlink != 0})
			}
			if strings.HasSuffix(path, ".zip") {
				skipped++
			}
			return nil
		})
		if err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

// ScanList reads entries from a list, one path a line, instead of walking, calling fn for each:
// a relative path is taken from cwd, blank lines are ignored, and a line IsSource refuses is
// skipped (counted). The files are not checked. An error of fn ends the scan.
func ScanList(r io.Reader, cwd string, services map[string]bool, fn func(Entry) error) (skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(cwd, line)
		}
		line = filepath.Clean(line)
		if !IsSource(filepath.Base(line), services) {
			skipped++
			continue
		}
		if err := fn(Entry{Path: line}); err != nil {
			return skipped, err
		}
	}
	return skipped, sc.Err()
}

// ListDir tracks the deepest directory holding every entry given to Add: the path of a corpus
// made for a list.
type ListDir struct{ dir string }

// Add notes an entry.
func (l *ListDir) Add(e Entry) {
	d := filepath.Dir(e.Path)
	if l.dir == "" {
		l.dir = d
		return
	}
	for !isBeneath(l.dir, d) && d != l.dir {
		l.dir = filepath.Dir(l.dir)
	}
}

// Dir is the directory: empty before any Add.
func (l *ListDir) Dir() string { return l.dir }

// Beneath checks entries against the path of a corpus: it refuses entries that do not lie
// beneath it, and symbolic links that lead out of it (they are opened as the replicas open
// them, with os.Root at the corpus path, which follows a link only while it stays beneath).
type Beneath struct {
	corpus, path string
	root         *os.Root
}

// NewBeneath checks entries of corpus against its path. Close it when done.
func NewBeneath(corpus, corpusPath string) *Beneath {
	if filepath.IsAbs(corpusPath) {
		corpusPath = filepath.Clean(corpusPath)
	}
	return &Beneath{corpus: corpus, path: corpusPath}
}

// Check refuses an entry not beneath the corpus path, or a link among them out of it.
func (b *Beneath) Check(e Entry) error {
	if !filepath.IsAbs(b.path) || !isBeneath(b.path, e.Path) {
		return fmt.Errorf("%s is not beneath the path %q of corpus %s: nothing imported "+
			"(import it into a corpus of its own)", e.Path, b.path, b.corpus)
	}
	if !e.Link {
		return nil
	}
	if b.root == nil {
		root, err := os.OpenRoot(b.path)
		if err != nil {
			return fmt.Errorf("corpus path %s: %w", b.path, pathErr(err))
		}
		b.root = root
	}
	rel, err := filepath.Rel(b.path, e.Path)
	if err != nil {
		return err
	}
	fi, err := b.root.Stat(rel)
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		target, _ := os.Readlink(e.Path)
		return fmt.Errorf("%s is a symbolic link to %s, which does not lead to a file beneath the "+
			"corpus path %s (%v): refused, nothing imported", e.Path, target, b.path, pathErr(err))
	}
	return nil
}

// Close releases what Check opened (a directory opened for reading: no error to report).
func (b *Beneath) Close() {
	if b.root != nil {
		_ = b.root.Close()
	}
}

// commonDir is the deepest directory holding every one of dirs (absolute and clean).
func commonDir(dirs []string) string {
	common := dirs[0]
	for _, d := range dirs[1:] {
		for !isBeneath(common, d) && d != common {
			common = filepath.Dir(common)
		}
	}
	return common
}

// isBeneath reports whether the clean absolute path lies beneath the directory dir.
func isBeneath(dir, path string) bool {
	return dir == "/" && path != "/" || strings.HasPrefix(path, dir+"/")
}

// isFile reports whether a walked entry is a regular file, or a symbolic link to one.
func isFile(path string, d fs.DirEntry) bool {
	if d.Type().IsRegular() {
		return true
	}
	if d.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// pathErr drops the operation and path of an *fs.PathError: the caller names the path.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
