package archive

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ReadSource reads the regular file at path, which must lie beneath the directory base, whole
// into buf (grown as need be) and returns the bytes: one openat2 resolved beneath base
// (RESOLVE_BENEATH: no step out of it, by "..", an absolute symbolic link or one leading out;
// no /proc magic links), one fstat, one read and one close, without the Go runtime's file
// wrapper. Where the kernel has no openat2 (before Linux 5.6) or it is refused, it reads
// through os.Root (readBeneathRoot). O_NONBLOCK: a FIFO planted as an entry must not hang the caller in open
// (it is then refused as not regular).
func ReadSource(base, path string, buf []byte) ([]byte, error) {
	rel, err := relBeneath(base, path)
	if err != nil {
		return nil, err
	}
	dirfd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: base, Err: err}
	}
	fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	unix.Close(dirfd)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		// No openat2, or a seccomp filter (an older container runtime's) that refuses it.
		return readBeneathRoot(base, path, buf)
	}
	if errors.Is(err, unix.EXDEV) {
		return nil, fmt.Errorf("%s (corpus path %s): %w", path, base, errOutsideCorpus)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: not a regular file (mode %#o)", path, st.Mode&unix.S_IFMT)
	}
	size := int(st.Size)
	if cap(buf) < size+1 {
		buf = make([]byte, 0, size+1) // one more, to see the end of a file that grew
	}
	buf = buf[:0]
	for range maxSourceReads {
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		buf = buf[:len(buf)+n]
		// All fstat said, and not a byte more than a full buffer could hold: done without a
		// read for the end of file.
		if n == 0 || (len(buf) == size && len(buf) < cap(buf)) {
			return buf, nil
		}
		if len(buf) == cap(buf) { // the file grew while we read it
			buf = append(buf, 0)[:len(buf)]
		}
	}
	return nil, fmt.Errorf("read %s: still growing after %d reads", path, maxSourceReads)
}

// maxSourceReads bounds the reads of one source archive: a file that keeps growing (a log
// planted as an entry) is refused rather than read forever.
const maxSourceReads = 1 << 16

// readBeneathRoot is ReadSource through os.Root (openBeneath), for kernels without openat2.
func readBeneathRoot(base, path string, buf []byte) ([]byte, error) {
	f, err := openBeneath(base, path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, st.Mode().Type())
	}
	if want := int(st.Size()) + 1; cap(buf) < want {
		buf = make([]byte, 0, want)
	}
	buf = buf[:0]
	for range maxSourceReads {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if len(buf) == cap(buf) { // the file grew while we read it
			buf = append(buf, 0)[:len(buf)]
		}
	}
	return nil, fmt.Errorf("read %s: still growing after %d reads", path, maxSourceReads)
}

// Open opens for reading the regular file at path, which must lie beneath base (its corpus's
// path), without a symbolic link leading out of it: a source or result archive, for readers
// other than the replica (the web dashboard's downloads). O_NONBLOCK: a FIFO planted as an
// archive is refused, not waited on.
func Open(base, path string) (*os.File, error) {
	f, err := openBeneath(base, path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}
