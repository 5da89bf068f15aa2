package cortexlog

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/cortexq/cortexq/queue"
)

// ErrUnusable is the error of an archive that says nothing about its task: it cannot be opened,
// is not a zip (an empty file included), has no cortex.log, exceeds the member limit, or cannot
// be read. Errors wrap it together with their cause.
var ErrUnusable = errors.New("unusable result archive")

// LogName is the only archive member read.
const LogName = "cortex.log"

// Defaults of Options.
const (
	MaxLogBytesDefault = 64 << 20
	MaxMembersDefault  = 100_000
)

// directoryBytesPerMember bounds the central directory, in bytes per allowed member: 46 bytes of
// header plus room for a long name and extra fields. Go's zip reader keeps every entry it finds in
// the directory, so the directory's size, not only its declared count, must be bounded.
const directoryBytesPerMember = 512

// Options bounds what FromReaderAt and Parse read; zero fields take their defaults.
type Options struct {
	// MaxLogBytes bounds the decompressed cortex.log. A longer log is read up to the limit (its
	// cut last line dropped) and gets a Warning cortex/log_truncated. Default MaxLogBytesDefault.
	MaxLogBytes int64
	// MaxMembers bounds the archive's member count; more members make it ErrUnusable.
	// Default MaxMembersDefault.
	MaxMembers int
	// MaxMessages bounds the messages kept of each severity; the rest still count for the
	// status, and one message cortex/messages_truncated of that severity gives their total.
	// Default MaxMessagesDefault.
	MaxMessages int
	// logSize is what an archive says its log's size is (set by FromReaderAt; 0: unknown): parse
	// makes room for the messages such a log holds at once.
	logSize int64
}

func (o Options) withDefaults() Options {
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = MaxLogBytesDefault
	}
	if o.MaxMembers <= 0 {
		o.MaxMembers = MaxMembersDefault
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = MaxMessagesDefault
	}
	return o
}

// FromReaderAt derives the report of the result archive held by r, size bytes long, reading only
// its first member named exactly cortex.log (not x/cortex.log). Every error wraps ErrUnusable.
func FromReaderAt(r io.ReaderAt, size int64, opts Options) (queue.Report, error) {
	opts = opts.withDefaults()
	if err := checkDirectory(r, size, opts.MaxMembers); err != nil {
		return queue.Report{}, fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	zr, err := zip.NewReader(r, size)
	if err != nil && !(errors.Is(err, zip.ErrInsecurePath) && zr != nil) {
		// Insecure member names do not matter: nothing is extracted.
		return queue.Report{}, fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	if len(zr.File) > opts.MaxMembers {
		return queue.Report{}, fmt.Errorf("%w: %d members, more than %d", ErrUnusable, len(zr.File), opts.MaxMembers)
	}
	var member *zip.File
	for _, f := range zr.File {
		if f.Name == LogName {
			member = f
			break
		}
	}
	if member == nil {
		return queue.Report{}, fmt.Errorf("%w: no %s member", ErrUnusable, LogName)
	}
	rc, err := member.Open()
	if err != nil {
		return queue.Report{}, fmt.Errorf("%w: open %s: %w", ErrUnusable, LogName, err)
	}
	defer rc.Close()
	opts.logSize = int64(min(member.UncompressedSize64, 1<<40))
	report, err := Parse(rc, opts)
	if err != nil {
		return queue.Report{}, fmt.Errorf("%w: %s: %w", ErrUnusable, LogName, err)
	}
	return report, nil
}

// Zip end-of-directory records, as archive/zip finds them.
const (
	directoryEndSignature   = 0x06054b50
	directoryEndLen         = 22
	directory64LocSignature = 0x07064b50
	directory64LocLen       = 20
	directory64EndSignature = 0x06064b50
	directory64EndLen       = 56
	directoryEndSearchBytes = 65 * 1024
)

// checkDirectory rejects, before archive/zip allocates for it, an archive whose end record
// declares more than maxMembers members or whose central directory could hold more than
// maxMembers·directoryBytesPerMember bytes of entries. It reads the records archive/zip reads and
// leaves any other malformation for archive/zip to report.
func checkDirectory(r io.ReaderAt, size int64, maxMembers int) error {
	// Like archive/zip, look for the end record in the last 1 KiB, then in the last 65 KiB.
	var buf []byte
	var window int64
	p := -1
	for _, n := range []int64{1 << 10, directoryEndSearchBytes} {
		window = min(size, n)
		buf = make([]byte, window)
		if _, err := r.ReadAt(buf, size-window); err != nil && err != io.EOF {
			return err
		}
		if p = findDirectoryEnd(buf); p >= 0 || window == size {
			break
		}
	}
	if p < 0 {
		return nil // archive/zip says it is not a zip
	}
	end := buf[p:]
	records := uint64(binary.LittleEndian.Uint16(end[10:]))
	dirSize := uint64(binary.LittleEndian.Uint32(end[12:]))
	dirOffset := uint64(binary.LittleEndian.Uint32(end[16:]))
	endOffset := size - window + int64(p)
	// dirSize == 0xffff, not 0xffffffff, is the test archive/zip makes: the same one is made here.
	if records == 0xffff || dirSize == 0xffff || dirOffset == 0xffffffff {
		if off, ok := readDirectory64End(r, endOffset, &records, &dirSize, &dirOffset); ok {
			endOffset = off
		}
	}
	if records > uint64(maxMembers) {
		return fmt.Errorf("%d members declared, more than %d", records, maxMembers)
	}
	// archive/zip scans entries from endOffset−dirSize, or from dirOffset when that holds an
	// entry, up to the end record: bound both spans.
	span := dirSize
	if dirOffset < uint64(endOffset) {
		span = max(span, uint64(endOffset)-dirOffset)
	}
	limit := uint64(math.MaxUint64)
	if uint64(maxMembers) < limit/directoryBytesPerMember {
		limit = uint64(maxMembers) * directoryBytesPerMember
	}
	if span > limit {
		return fmt.Errorf("central directory of %d bytes, more than %d", span, limit)
	}
	return nil
}

// findDirectoryEnd returns the offset in b of the last end record, or -1 when there is none or
// its comment runs past the end.
func findDirectoryEnd(b []byte) int {
	for i := len(b) - directoryEndLen; i >= 0; i-- {
		if binary.LittleEndian.Uint32(b[i:]) == directoryEndSignature {
			if i+directoryEndLen+int(binary.LittleEndian.Uint16(b[i+directoryEndLen-2:])) > len(b) {
				return -1
			}
			return i
		}
	}
	return -1
}

// readDirectory64End reads the zip64 end record that the locator before endOffset points at,
// updating the member count and directory position; ok is false when there is none.
func readDirectory64End(r io.ReaderAt, endOffset int64, records, dirSize, dirOffset *uint64) (int64, bool) {
	if endOffset < directory64LocLen {
		return 0, false
	}
	loc := make([]byte, directory64LocLen)
	if _, err := r.ReadAt(loc, endOffset-directory64LocLen); err != nil {
		return 0, false
	}
	if binary.LittleEndian.Uint32(loc) != directory64LocSignature ||
		binary.LittleEndian.Uint32(loc[4:]) != 0 || binary.LittleEndian.Uint32(loc[16:]) != 1 {
		return 0, false
	}
	off := binary.LittleEndian.Uint64(loc[8:])
	if off > 1<<62 {
		return 0, false
	}
	end := make([]byte, directory64EndLen)
	if _, err := r.ReadAt(end, int64(off)); err != nil {
		return 0, false
	}
	if binary.LittleEndian.Uint32(end) != directory64EndSignature {
		return 0, false
	}
	*records = binary.LittleEndian.Uint64(end[32:])
	*dirSize = binary.LittleEndian.Uint64(end[40:])
	*dirOffset = binary.LittleEndian.Uint64(end[48:])
	return int64(off), true
}
