package archive

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkCreateResultFile compares ways of putting an 8 KB result file in place, in fresh
// directories of 20 files each (docs/performance.md#where-a-tasks-cpu-goes-and-what-stands-in-the-way):
//
//   - temp: what Pending does, a temp file created beneath the corpus (openat2 on a fresh
//     descriptor of the corpus directory), writev, then renameat2(RENAME_NOREPLACE);
//   - tmpfile: an unnamed O_TMPFILE file, writev, then linkat through /proc/self/fd;
//   - either with the corpus directory's descriptor kept open (-dirfd).
//
// Run it on an idle machine with -benchtime 20000x: on the development machine's ext4 the four
// were within a few µs of each other.
func BenchmarkCreateResultFile(b *testing.B) {
	data := [][]byte{make([]byte, 8192)}
	// One parent for all the runs, removed only at the end: on ext4 a file created among
	// thousands just deleted costs several times the CPU (docs/performance.md#benchmarks), so
	// no run may follow another's clean-up.
	parent, err := os.MkdirTemp("", "cortexq-create-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(parent)
	// Each mode twice, the second time in reverse order, so that neither is always first.
	for _, mode := range []string{"temp", "tmpfile", "temp-dirfd", "tmpfile-dirfd", "tmpfile-dirfd", "temp-dirfd", "tmpfile", "temp"} {
		b.Run(mode, func(b *testing.B) {
			base, err := os.MkdirTemp(parent, mode+"-")
			if err != nil {
				b.Fatal(err)
			}
			for i := range b.N/20 + 1 {
				if err := os.Mkdir(filepath.Join(base, strconv.Itoa(i)), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			cached := -1
			if mode == "temp-dirfd" || mode == "tmpfile-dirfd" {
				fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer unix.Close(fd)
				cached = fd
			}
			how := func(flags int) *unix.OpenHow {
				return &unix.OpenHow{Flags: uint64(flags) | unix.O_CLOEXEC, Mode: 0o644,
					Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
			}
			b.ResetTimer()
			for i := range b.N {
				dir := strconv.Itoa(i / 20)
				target := filepath.Join(base, dir, strconv.Itoa(i)+".zip")
				dirfd := cached
				if dirfd < 0 {
					fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
					if err != nil {
						b.Fatal(err)
					}
					dirfd = fd
				}
				if err := createOne(mode == "tmpfile" || mode == "tmpfile-dirfd", base, dirfd, dir, target, data, how); err != nil {
					b.Fatal(err)
				}
				if cached < 0 {
					unix.Close(dirfd)
				}
			}
		})
	}
}

func createOne(tmpfile bool, base string, dirfd int, dir, target string, data [][]byte, how func(int) *unix.OpenHow) error {
	if tmpfile {
		fd, err := unix.Openat2(dirfd, dir, how(unix.O_WRONLY|unix.O_TMPFILE))
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := writeFrames(fd, data); err != nil {
			return err
		}
		return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, target, unix.AT_SYMLINK_FOLLOW)
	}
	tmp := filepath.Join(dir, "."+filepath.Base(target)+".tmp")
	fd, err := unix.Openat2(dirfd, tmp, how(unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL))
	if err != nil {
		return err
	}
	if err := writeFrames(fd, data); err != nil {
		unix.Close(fd)
		return err
	}
	if err := unix.Close(fd); err != nil {
		return err
	}
	return unix.Renameat2(unix.AT_FDCWD, filepath.Join(base, tmp), unix.AT_FDCWD, target, unix.RENAME_NOREPLACE)
}
