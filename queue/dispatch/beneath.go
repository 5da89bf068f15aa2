package dispatch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// errOutsideCorpus is an entry, or a result archive, that does not lie beneath its corpus's
// path: an entry edited to point elsewhere is neither read nor written beside.
var errOutsideCorpus = errors.New("not beneath the corpus path")

// relBeneath reports path relative to the directory base, refusing a path that is not
// lexically beneath it (or a base that is not an absolute path).
func relBeneath(base, path string) (string, error) {
	if !filepath.IsAbs(base) || !filepath.IsAbs(path) {
		return "", fmt.Errorf("%s (corpus path %q): %w", path, base, errOutsideCorpus)
	}
	rel, err := filepath.Rel(base, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s (corpus path %s): %w", path, base, errOutsideCorpus)
	}
	return rel, nil
}

// openBeneath opens path, which must lie beneath the directory base, without leaving base: a
// symbolic link is followed only while it stays beneath base (os.Root), so a link planted in a
// corpus that points out of it is an error, not a read or write outside.
func openBeneath(base, path string, flag int, perm os.FileMode) (*os.File, error) {
	rel, err := relBeneath(base, path)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.OpenFile(rel, flag, perm)
}
