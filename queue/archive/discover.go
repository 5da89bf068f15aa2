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

// Sources is what a search for source archives found, for an import.
type Sources struct {
	// Entries are the source archives' absolute, clean paths.
	Entries []string
	// Links are the walked entries that are symbolic links (CheckBeneath follows them).
	Links map[string]bool
	// Skipped counts what was not a source archive: walked *.zip files (result archives) or
	// listed lines.
	Skipped int
	// Dir is the deepest directory holding every root walked, or every entry listed: the path
	// of a corpus made for them.
	Dir string
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

// FindSources walks roots (absolute paths from Roots) for source archives: regular files, or
// symbolic links to them, that IsSource takes given the services' names.
func FindSources(roots []string, services map[string]bool) (Sources, error) {
	s := Sources{Links: map[string]bool{}}
	dirs := make([]string, 0, len(roots))
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !isFile(path, d) {
				return nil
			}
			if IsSource(filepath.Base(path), services) {
				s.Entries = append(s.Entries, path)
				if d.Type()&fs.ModeSymlink != 0 {
					s.Links[path] = true
				}
			} else if strings.HasSuffix(path, ".zip") {
				s.Skipped++
			}
			return nil
		})
		if err != nil {
			return Sources{}, err
		}
		if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
			root = filepath.Dir(root)
		}
		dirs = append(dirs, root)
	}
	if len(dirs) > 0 {
		s.Dir = commonDir(dirs)
	}
	return s, nil
}

// ListSources reads entries from a list, one path a line, instead of walking: a relative path
// is taken from cwd, blank lines are ignored, and a line IsSource refuses is skipped. The files
// are not checked.
func ListSources(r io.Reader, cwd string, services map[string]bool) (Sources, error) {
	var s Sources
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
		if IsSource(filepath.Base(line), services) {
			s.Entries = append(s.Entries, line)
		} else {
			s.Skipped++
		}
	}
	if err := sc.Err(); err != nil {
		return Sources{}, err
	}
	if len(s.Entries) > 0 {
		dirs := make([]string, len(s.Entries))
		for i, e := range s.Entries {
			dirs[i] = filepath.Dir(e)
		}
		s.Dir = commonDir(dirs)
	}
	return s, nil
}

// CheckBeneath refuses entries that do not lie beneath the corpus's path, and symbolic links
// among them that lead out of it: they are opened as the replicas open them (os.Root at the
// corpus path), which follows a link only while it stays beneath.
func (s Sources) CheckBeneath(corpus, corpusPath string) error {
	if filepath.IsAbs(corpusPath) {
		corpusPath = filepath.Clean(corpusPath)
	}
	for _, e := range s.Entries {
		if !filepath.IsAbs(corpusPath) || !isBeneath(corpusPath, e) {
			return fmt.Errorf("%s is not beneath the path %q of corpus %s: nothing imported "+
				"(import it into a corpus of its own)", e, corpusPath, corpus)
		}
	}
	if len(s.Links) == 0 {
		return nil
	}
	root, err := os.OpenRoot(corpusPath)
	if err != nil {
		return fmt.Errorf("corpus path %s: %w", corpusPath, pathErr(err))
	}
	defer root.Close()
	for _, e := range s.Entries {
		if !s.Links[e] {
			continue
		}
		rel, err := filepath.Rel(corpusPath, e)
		if err != nil {
			return err
		}
		fi, err := root.Stat(rel)
		if err == nil && !fi.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err != nil {
			target, _ := os.Readlink(e)
			return fmt.Errorf("%s is a symbolic link to %s, which does not lead to a file beneath the "+
				"corpus path %s (%v): refused, nothing imported", e, target, corpusPath, pathErr(err))
		}
	}
	return nil
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
