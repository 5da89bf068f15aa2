package latexml

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits bound what Unpack writes to disk from one source archive.
type Limits struct {
	// MaxBytes is the most bytes all members may hold once uncompressed (MaxUnpackBytesDefault if
	// zero). Sizes are counted as the members are inflated, not taken from their headers.
	MaxBytes int64
	// MaxFiles is the most members an archive may have (MaxUnpackFilesDefault if zero).
	MaxFiles int
}

// Defaults of Limits.
const (
	MaxUnpackBytesDefault = 1 << 30
	MaxUnpackFilesDefault = 20_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = MaxUnpackBytesDefault
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = MaxUnpackFilesDefault
	}
	return l
}

// InvalidError says why a source archive cannot be converted at all: the task's verdict is
// Invalid, written to cortex.log as Fatal:invalid:<Category> <Details>.
type InvalidError struct {
	Category string
	Details  string
}

func (e *InvalidError) Error() string { return e.Category + ": " + e.Details }

func invalidf(category, format string, args ...any) *InvalidError {
	return &InvalidError{Category: category, Details: fmt.Sprintf(format, args...)}
}

// Invalid categories of the source archive, as cortex.log gives them.
const (
	InvalidUnreadable = "unreadable_archive" // not a zip, or a member that does not inflate
	InvalidUnsafe     = "unsafe_archive"     // a member named outside the archive's directory
	InvalidTooLarge   = "archive_too_large"  // over Limits.MaxBytes or Limits.MaxFiles
	InvalidNoTeX      = "no_tex"             // no .tex file at all
	InvalidNoMain     = "no_main_tex"        // several .tex files, none with \documentclass
)

// Unpack extracts the zip archive at src into the existing directory dir, safely: every member
// must name a path beneath dir (no absolute path, no "..", no backslash, no drive letter), at
// most lim.MaxFiles members and lim.MaxBytes uncompressed bytes are written, and only regular
// files and directories are made (symbolic links and other special members are skipped and
// listed in skipped). Files are created through an os.Root of dir and never overwrite one
// another. A source archive that breaks these rules is an *InvalidError; other errors (a full
// disk) are the worker's.
func Unpack(src, dir string, lim Limits) (skipped []string, err error) {
	lim = lim.withDefaults()
	zr, err := zip.OpenReader(src)
	if err != nil {
		return nil, invalidf(InvalidUnreadable, "the source archive is not a readable zip: %v", err)
	}
	defer func() { _ = zr.Close() }() // only read
	if len(zr.File) > lim.MaxFiles {
		return nil, invalidf(InvalidTooLarge, "the source archive has %d members, more than the limit of %d", len(zr.File), lim.MaxFiles)
	}
	// Check every name before writing anything.
	for _, f := range zr.File {
		if err := checkName(f.Name); err != nil {
			return nil, err
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("unpack: %w", err)
	}
	defer root.Close()
	left := lim.MaxBytes
	for _, f := range zr.File {
		name := strings.TrimSuffix(f.Name, "/")
		mode := f.Mode()
		switch {
		case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
			if err := root.MkdirAll(name, 0o755); err != nil {
				return nil, fmt.Errorf("unpack %s: %w", name, err)
			}
			continue
		case !mode.IsRegular():
			skipped = append(skipped, f.Name)
			continue
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("unpack %s: %w", name, err)
			}
		}
		n, err := extract(root, f, name, left, lim.MaxBytes)
		if err != nil {
			return nil, err
		}
		left -= n
	}
	return skipped, nil
}

// checkName refuses a member name that would land outside the directory it is unpacked in.
func checkName(name string) error {
	clean := strings.TrimSuffix(name, "/")
	switch {
	case clean == "":
		return invalidf(InvalidUnsafe, "a member has an empty name")
	case strings.ContainsAny(name, "\\\x00"):
		return invalidf(InvalidUnsafe, "member %q: backslashes and NULs are not allowed in names", name)
	case !filepath.IsLocal(clean) || path.Clean(clean) != clean:
		return invalidf(InvalidUnsafe, "member %q names a path outside the archive's directory (absolute, .. or not clean)", name)
	}
	return nil
}

// extract writes one regular member, allowing it at most left of the archive's limit bytes, and
// returns how many it wrote.
func extract(root *os.Root, f *zip.File, name string, left, limit int64) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, invalidf(InvalidUnreadable, "member %q: %v", f.Name, err)
	}
	defer rc.Close()
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return 0, invalidf(InvalidUnsafe, "member %q appears twice in the archive", f.Name)
	}
	if err != nil {
		return 0, fmt.Errorf("unpack %s: %w", name, err)
	}
	// One byte more than allowed tells a member at the limit from one over it.
	n, err := io.Copy(out, io.LimitReader(rc, left+1))
	cerr := out.Close()
	switch {
	case n > left:
		return n, invalidf(InvalidTooLarge, "the source archive inflates to more than the limit of %d bytes", limit)
	case err != nil:
		var pe *os.PathError
		if errors.As(err, &pe) {
			return n, fmt.Errorf("unpack %s: %w", name, err) // the disk's fault, not the archive's
		}
		return n, invalidf(InvalidUnreadable, "member %q does not inflate: %v", f.Name, err)
	case cerr != nil:
		return n, fmt.Errorf("unpack %s: %w", name, cerr)
	}
	return n, nil
}
