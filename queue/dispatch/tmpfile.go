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

// anonArchives writes the result archive of a target that does not exist yet to an unnamed
// file (O_TMPFILE) in the target's directory, linked into place by publish, where the file
// system allows: no temp name is created and renamed. An archive that replaces another goes to
// a temp file renamed over it, as do all where the file system has no O_TMPFILE or this is
// false. BenchmarkResultArchive measured both: the unnamed file pays for a new target and costs
// more over an existing one (linkat cannot replace: a failed link, a link and a rename).
var anonArchives atomic.Bool

func init() { anonArchives.Store(true) }

// anonArchive is a result archive written to an unnamed file in its target's directory.
type anonArchive struct {
	file *os.File // the unnamed file (O_TMPFILE)
	dir  *os.File // its directory, opened beneath the corpus path
}

// writeArchive writes a result's data for it.target: writeArchiveAs, or writeTemp when
// anonArchives is off.
func (s *Server) writeArchive(base string, it *item, data [][]byte) error {
	if !anonArchives.Load() {
		tmp, err := s.writeTemp(base, it.target, data)
		it.tmp = tmp
		return err
	}
	return writeArchiveAs(base, it, data, true)
}

// writeArchiveAs writes a result's data for it.target, in its directory opened beneath base
// (os.Root: no symbolic link out of the corpus path is followed), readable by all under the
// umask (0644): to an unnamed file (it.anon) if the target does not exist and the file system
// has O_TMPFILE (tests pass tmpfile false for one that has not), else to a temp file beside the
// target (it.tmp).
func writeArchiveAs(base string, it *item, data [][]byte, tmpfile bool) error {
	rel, err := relBeneath(base, it.target)
	if err != nil {
		return fmt.Errorf("create temp archive: %w", err)
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return fmt.Errorf("create temp archive: %w", err)
	}
	dir, err := root.OpenFile(filepath.Dir(rel), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	root.Close()
	if err != nil {
		return fmt.Errorf("create temp archive: %w", err)
	}
	dirfd := int(dir.Fd())
	var st unix.Stat_t
	if tmpfile && errors.Is(unix.Fstatat(dirfd, filepath.Base(rel), &st, unix.AT_SYMLINK_NOFOLLOW), unix.ENOENT) {
		fd, err := unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err == nil {
			a := &anonArchive{file: os.NewFile(uintptr(fd), it.target), dir: dir}
			if err := writeFrames(a.file, data); err != nil {
				a.close()
				return fmt.Errorf("write archive: %w", err)
			}
			it.anon = a
			return nil
		}
		// EOPNOTSUPP: a file system without O_TMPFILE (EISDIR: a kernel without it); any
		// other error, the temp file meets too.
	}
	defer dir.Close()
	tmp := tempName(it.target)
	fd, err := unix.Openat(dirfd, filepath.Base(tmp), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create temp archive: %w", &os.PathError{Op: "open", Path: tmp, Err: err})
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = writeFrames(f, data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, filepath.Base(tmp), 0)
		return fmt.Errorf("write temp archive: %w", err)
	}
	it.tmp = tmp
	return nil
}

// writeFrames writes a result's frames to f.
func writeFrames(f *os.File, data [][]byte) error {
	for _, frame := range data {
		if _, err := f.Write(frame); err != nil {
			return err
		}
	}
	return nil
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
