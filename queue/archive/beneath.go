package archive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// errOutsideCorpus is an entry, or a result archive, that does not lie beneath its corpus's
// path: an entry edited to point elsewhere is neither read nor written beside.
var errOutsideCorpus = errors.New("not beneath the corpus path")

// relBeneath reports path relative to the directory base, refusing a path that is not
// lexically beneath it (or a base that is not an absolute path).
func relBeneath(base, path string) (string, error) {
	// The common case without filepath.Rel's allocations: both clean (Clean allocates nothing
	// for a clean path), path starting with base and a separator. A clean absolute path has
	// no ".." element, so the rest is beneath base.
	if len(path) > len(base)+1 && len(base) > 1 && base[0] == '/' && path[len(base)] == '/' &&
		path[:len(base)] == base && filepath.Clean(base) == base && filepath.Clean(path) == path {
		return path[len(base)+1:], nil
	}
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
//
// It opens with one openat2 resolved beneath base where the kernel has it (openat2Beneath, as ReadSource does),
// else through os.Root, whose walk costs a system call per path component.
func openBeneath(base, path string, flag int, perm os.FileMode) (*os.File, error) {
	rel, err := relBeneath(base, path)
	if err != nil {
		return nil, err
	}
	if f, ok, err := openat2Beneath(base, rel, path, flag, perm); ok {
		return f, err
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.OpenFile(rel, flag, perm)
}

// openat2Beneath opens rel beneath base with openat2 (RESOLVE_BENEATH, no magic links). ok is
// false where the kernel has no openat2, or refuses it (an older container runtime's seccomp
// filter): the caller falls back to os.Root.
func openat2Beneath(base, rel, path string, flag int, perm os.FileMode) (f *os.File, ok bool, err error) {
	fd, ok, err := openat2BeneathFD(base, rel, path, flag, perm)
	if !ok || err != nil {
		return nil, ok, err
	}
	return os.NewFile(uintptr(fd), path), true, nil
}

// openat2BeneathFD is openat2Beneath's open, returning the raw descriptor (close-on-exec).
func openat2BeneathFD(base, rel, path string, flag int, perm os.FileMode) (fd int, ok bool, err error) {
	dirfd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, true, &os.PathError{Op: "open", Path: base, Err: err}
	}
	fd, err = unix.Openat2(dirfd, rel, &unix.OpenHow{
		Flags:   uint64(flag) | unix.O_CLOEXEC,
		Mode:    uint64(perm.Perm()),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	unix.Close(dirfd)
	switch {
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
		return -1, false, nil
	case errors.Is(err, unix.EXDEV):
		return -1, true, fmt.Errorf("%s (corpus path %s): %w", path, base, errOutsideCorpus)
	case err != nil:
		return -1, true, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, true, nil
}
