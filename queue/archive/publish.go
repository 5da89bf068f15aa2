package archive

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Pending is one result archive on its way into place: written beside its target under a temp
// name (Write), put into place by its claim (Publish), and put back if that claim certainly did
// not commit (Unpublish). The archive a publish replaces is kept aside, as a hard link, until
// the claim is over (Cleanup).
type Pending struct {
	// Target is where the archive goes (ResultPath).
	Target string
	// RemoveOld makes Publish remove Target instead: a result not to keep (too large).
	RemoveOld bool
	// TaskID and Tag name the backup file (Sweep reads the tag).
	TaskID int64
	Tag    Tag
	// Size and Digest are the archive's size and SHA-256, set by Write: what the claim records
	// for `cortexq verify` (docs/operations.md, "Backup and restore").
	Size   int64
	Digest []byte

	tmp       string // the archive written beside Target, renamed into place by Publish
	backup    string // the earlier archive, kept aside by Publish until Cleanup
	published bool
}

// Write writes data to a new temp file beside Target, created beneath base (its corpus's path:
// no step out of it) and readable by all under the umask (0644): frontends read results as
// another user.
func (p *Pending) Write(base string, data [][]byte) error {
	p.digest(data)
	name := p.tempName()
	rel, err := relBeneath(base, name)
	if err != nil {
		return fmt.Errorf("create temp archive: %w", err)
	}
	fd, ok, err := openat2BeneathFD(base, rel, name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if !ok {
		return p.writeRoot(base, name, data)
	}
	if err != nil {
		return fmt.Errorf("create temp archive: %w", err)
	}
	// The raw descriptor, written with writev: no os.File (its finalizer, its poller
	// registration) and one system call for all the frames of a result.
	if err := writeFrames(fd, data); err != nil {
		unix.Close(fd)
		os.Remove(name)
		return fmt.Errorf("write temp archive: %w", &os.PathError{Op: "write", Path: name, Err: err})
	}
	if err := unix.Close(fd); err != nil {
		os.Remove(name)
		return fmt.Errorf("close temp archive: %w", &os.PathError{Op: "close", Path: name, Err: err})
	}
	p.tmp = name
	return nil
}

// digest sets Size and Digest from the frames Write is about to write.
func (p *Pending) digest(data [][]byte) {
	h := sha256.New()
	p.Size = 0
	for _, frame := range data {
		h.Write(frame)
		p.Size += int64(len(frame))
	}
	p.Digest = h.Sum(nil)
}

// writeRoot is Write through os.Root (openBeneath), for kernels without openat2.
func (p *Pending) writeRoot(base, name string, data [][]byte) error {
	f, err := openBeneath(base, name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create temp archive: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(name)
		return err
	}
	for _, frame := range data {
		if _, err := f.Write(frame); err != nil {
			return fail(fmt.Errorf("write temp archive: %w", err))
		}
	}
	if err := f.Close(); err != nil {
		return fail(fmt.Errorf("close temp archive: %w", err))
	}
	p.tmp = name
	return nil
}

// tempName is a fresh temp name beside Target (.<archive>.tmp-<tag><random>), built in one
// allocation: Target is clean (ResultPath), so its directory is what precedes its last '/'.
func (p *Pending) tempName() string {
	dir, file := "", p.Target
	if i := strings.LastIndexByte(p.Target, '/'); i >= 0 {
		dir, file = p.Target[:i+1], p.Target[i+1:]
	}
	var b strings.Builder
	b.Grow(len(p.Target) + len(p.Tag.replica) + len(p.Tag.incarnation) + 24)
	b.WriteString(dir)
	b.WriteByte('.')
	b.WriteString(file)
	b.WriteString(".tmp-")
	if p.Tag.replica != "" {
		b.WriteString(p.Tag.replica)
		b.WriteByte('.')
		b.WriteString(p.Tag.incarnation)
		b.WriteByte('-')
	}
	var hex [16]byte
	b.Write(strconv.AppendUint(hex[:0], rand.Uint64(), 16))
	return b.String()
}

// writeFrames writes all of data to fd, with writev: up to maxIovecs frames a call, again
// after a short write or EINTR.
func writeFrames(fd int, data [][]byte) error {
	for len(data) > 0 {
		if len(data[0]) == 0 {
			data = data[1:]
			continue
		}
		n, err := unix.Writev(fd, data[:min(len(data), maxIovecs)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		for n > 0 {
			if n < len(data[0]) {
				// Part of a frame written: the rest of it goes first in the next call, on a
				// copy of the list's head (the caller's slice is not changed).
				head := data[0][n:]
				data = append([][]byte{head}, data[1:]...)
				n = 0
				break
			}
			n -= len(data[0])
			data = data[1:]
		}
	}
	return nil
}

// maxIovecs is the most buffers one writev takes (Linux's IOV_MAX).
const maxIovecs = 1024

// Published reports whether Publish has put the archive in place (and Unpublish not undone it).
func (p *Pending) Published() bool { return p.published }

// Publish puts the archive in place, inside its claim's transaction. The archive it replaces
// is kept aside (a hard link, no copy) until the claim's outcome is known, so that a claim that
// does not commit can put it back (Unpublish). Call it once, until an Unpublish.
func (p *Pending) Publish() error {
	switch {
	case p.RemoveOld:
		p.backup = p.backupName()
		if err := os.Rename(p.Target, p.backup); err != nil {
			p.backup = ""
			if !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove the earlier archive: %w", err)
			}
		}
	case p.tmp != "":
		// No earlier archive, the common case: one renameat2 that refuses to replace one,
		// instead of a link that fails and a rename. Any error (one there, a kernel or file
		// system without RENAME_NOREPLACE) takes the path that keeps the earlier one aside.
		if err := unix.Renameat2(unix.AT_FDCWD, p.tmp, unix.AT_FDCWD, p.Target, unix.RENAME_NOREPLACE); err == nil {
			break
		}
		p.backup = p.backupName()
		if err := os.Link(p.Target, p.backup); err != nil {
			// None to keep, or a file system without hard links: then a claim that fails
			// leaves the new archive in place, as it would without the backup.
			p.backup = ""
		}
		if err := os.Rename(p.tmp, p.Target); err != nil {
			p.dropBackup()
			return fmt.Errorf("publish archive: %w", err)
		}
	}
	p.published = true
	return nil
}

// backupName is a fresh name beside the target for the archive a publish replaces.
func (p *Pending) backupName() string {
	return filepath.Join(filepath.Dir(p.Target),
		fmt.Sprintf(".%s.prev-%s%d-%x", filepath.Base(p.Target), p.Tag, p.TaskID, rand.Uint64()))
}

// Unpublish undoes Publish after a claim that certainly did not commit: the earlier archive is
// back in place (or none, if there was none), and the result's archive is back at its temp
// name, for a retry to publish again.
func (p *Pending) Unpublish() error {
	if !p.published {
		return nil
	}
	var errs []error
	if p.tmp != "" {
		if p.backup == "" {
			// No earlier archive (or no hard links): the result's leaves the target empty.
			errs = append(errs, os.Rename(p.Target, p.tmp))
		} else if err := os.Link(p.Target, p.tmp); err != nil {
			errs = append(errs, err)
		}
	}
	if p.backup != "" {
		errs = append(errs, os.Rename(p.backup, p.Target))
	}
	p.backup, p.published = "", false
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("put the earlier archive of task %d back: %w", p.TaskID, err)
	}
	return nil
}

// dropBackup removes the earlier archive kept by Publish.
func (p *Pending) dropBackup() {
	if p.backup != "" {
		os.Remove(p.backup)
		p.backup = ""
	}
}

// Cleanup ends the archive's claim: it removes the temp file unless it was published, and the
// earlier archive kept aside.
func (p *Pending) Cleanup() {
	if p.tmp != "" && !p.published {
		os.Remove(p.tmp)
	}
	p.dropBackup()
}

// SyncPublished flushes the file systems holding the published archives of batch to disk: one
// syncfs per file system, at a fraction of a fsync per file.
func SyncPublished(batch []*Pending) error {
	synced := map[uint64]bool{}
	for _, p := range batch {
		if !p.published || p.Target == "" || p.RemoveOld {
			continue
		}
		dir := filepath.Dir(p.Target)
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return fmt.Errorf("sync archives: %w", err)
		}
		if synced[st.Dev] {
			continue
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("sync archives: %w", err)
		}
		err = unix.Syncfs(fd)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("sync archives: %w", err)
		}
		synced[st.Dev] = true
	}
	return nil
}
