package dispatch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// anonArchives writes result archives to unnamed files (O_TMPFILE) in their target's
// directory, linked into place by publish, where the file system allows: no temp name is
// created, renamed or removed. Where it does not, and when this is false (tests force the
// fallback with it), they go to a temp file beside the target, renamed into place.
var anonArchives = true

// anonArchive is a result archive written to an unnamed file in its target's directory.
type anonArchive struct {
	file *os.File // the unnamed file (O_TMPFILE)
	dir  *os.File // its directory, opened beneath the corpus path
}

// errNoTmpfile is a file system (or kernel) without O_TMPFILE.
var errNoTmpfile = errors.New("no O_TMPFILE")

// writeArchive writes a result's data for it.target: to an unnamed file where the file
// system allows (it.anon), else to a temp file beside the target (it.tmp).
func (s *Server) writeArchive(base string, it *item, data [][]byte) error {
	if anonArchives {
		a, err := writeAnon(base, it.target, data)
		if err == nil {
			it.anon = a
			return nil
		}
		if !errors.Is(err, errNoTmpfile) {
			return err
		}
	}
	tmp, err := s.writeTemp(base, it.target, data)
	it.tmp = tmp
	return err
}

// writeAnon writes data to an unnamed file, readable by all under the umask (0644), in the
// directory of target, which is opened beneath base (os.Root: no symbolic link out of it is
// followed). An error wrapping errNoTmpfile means the file system has no O_TMPFILE.
func writeAnon(base, target string, data [][]byte) (*anonArchive, error) {
	rel, err := relBeneath(base, target)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return nil, fmt.Errorf("create archive: %w", err)
	}
	dir, err := root.OpenFile(filepath.Dir(rel), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	root.Close()
	if err != nil {
		return nil, fmt.Errorf("create archive: %w", err)
	}
	fd, err := unix.Openat(int(dir.Fd()), ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		dir.Close()
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("create archive: %w (%w)", errNoTmpfile, err)
		}
		return nil, fmt.Errorf("create archive: %w", err)
	}
	a := &anonArchive{file: os.NewFile(uintptr(fd), target), dir: dir}
	for _, frame := range data {
		if _, err := a.file.Write(frame); err != nil {
			a.close()
			return nil, fmt.Errorf("write archive: %w", err)
		}
	}
	return a, nil
}

// emptyPathDenied is set once linkat with AT_EMPTY_PATH was refused (it takes
// CAP_DAC_READ_SEARCH): links then go through /proc/self/fd.
var emptyPathDenied atomic.Bool

// linkAt links the unnamed file into its directory as name; EEXIST if name exists.
func (a *anonArchive) linkAt(name string) error {
	dirfd := int(a.dir.Fd())
	if !emptyPathDenied.Load() {
		err := unix.Linkat(int(a.file.Fd()), "", dirfd, name, unix.AT_EMPTY_PATH)
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EPERM) {
			return err
		}
		emptyPathDenied.Store(true)
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(a.file.Fd())), dirfd, name, unix.AT_SYMLINK_FOLLOW)
}

// place puts the unnamed file at target, relative to its directory: linked there when no file
// is, else linked to a fresh temp name and renamed over the one there (a link cannot replace).
func (a *anonArchive) place(target string) error {
	name := filepath.Base(target)
	err := a.linkAt(name)
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	tmp := filepath.Base(tempName(target))
	if err := a.linkAt(tmp); err != nil {
		return err
	}
	dirfd := int(a.dir.Fd())
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return err
	}
	return nil
}

// close lets the unnamed file go (gone with it unless linked) and its directory.
func (a *anonArchive) close() {
	a.file.Close()
	a.dir.Close()
}

// tempName is a fresh temp name beside target.
func tempName(target string) string {
	return filepath.Join(filepath.Dir(target), fmt.Sprintf(".%s.tmp-%x", filepath.Base(target), rand.Uint64()))
}
