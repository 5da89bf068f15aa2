package dispatch

import (
	"fmt"
	"os"
	"syscall"
)

// ResultPath is where the result archive of a task of entry lies: <entry dir>/<service>.zip, or
// <service>.sandbox-<id>.zip for a task of sandbox id (0: an ordinary corpus). It is "" for an
// entry without a directory or not beneath base, its corpus's path.
func ResultPath(base, entry, service string, sandbox int32) string {
	return resultPath(base, entry, service, sandbox)
}

// OpenArchive opens for reading the regular file at path, which must lie beneath base (its
// corpus's path) without a symbolic link leading out of it: a source or result archive, for
// readers other than the replica (the web dashboard's downloads).
func OpenArchive(base, path string) (*os.File, error) {
	f, err := openBeneath(base, path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
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
