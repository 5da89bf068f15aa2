package archive

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPublishKeepsTheEarlierArchiveAside: a result published where none was (renameat2 with
// RENAME_NOREPLACE) and one published over an earlier archive (kept aside as a hard link) both
// land in place, and Unpublish puts back exactly what was there: nothing, or the earlier archive.
func TestPublishKeepsTheEarlierArchiveAside(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "paper")
	require.NoError(t, os.Mkdir(dir, 0o755))
	target := ResultPath(base, filepath.Join(dir, "paper.zip"), "tex_to_html", 0)
	tag := NewTag("r1")

	// None there: published, undone, published again by a retry, kept.
	p := &Pending{Target: target, TaskID: 7, Tag: tag}
	require.NoError(t, p.Write(base, [][]byte{[]byte("new "), nil, []byte("archive")}))
	require.NoError(t, p.Publish())
	require.True(t, p.Published())
	requireFile(t, target, "new archive")
	require.Equal(t, []string{filepath.Base(target)}, names(t, dir), "no backup of an archive that was not there")
	require.NoError(t, p.Unpublish())
	require.NoFileExists(t, target)
	require.Len(t, names(t, dir), 1, "the result is back at its temp name")
	require.NoError(t, p.Publish())
	p.Cleanup()
	requireFile(t, target, "new archive")
	require.Equal(t, []string{filepath.Base(target)}, names(t, dir))

	// One there: replaced, the earlier one kept aside until Cleanup, put back by Unpublish.
	q := &Pending{Target: target, TaskID: 7, Tag: tag}
	require.NoError(t, q.Write(base, [][]byte{[]byte("newer")}))
	require.NoError(t, q.Publish())
	requireFile(t, target, "newer")
	require.Len(t, names(t, dir), 2, "the archive in place and the earlier one aside")
	require.NoError(t, q.Unpublish())
	requireFile(t, target, "new archive")
	require.NoError(t, q.Publish())
	q.Cleanup()
	requireFile(t, target, "newer")
	require.Equal(t, []string{filepath.Base(target)}, names(t, dir))

	// A temp file never published is removed by Cleanup.
	r := &Pending{Target: target, TaskID: 8, Tag: tag}
	require.NoError(t, r.Write(base, [][]byte{[]byte("dropped")}))
	r.Cleanup()
	requireFile(t, target, "newer")
	require.Equal(t, []string{filepath.Base(target)}, names(t, dir))
}

// TestWriteFramesManyAndEmpty: writev in batches of maxIovecs writes every frame in order,
// empty ones skipped.
func TestWriteFramesManyAndEmpty(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	var frames [][]byte
	var want []byte
	for i := range 3*maxIovecs + 5 {
		f := bytes.Repeat([]byte{byte('a' + i%26)}, i%7)
		frames = append(frames, f)
		want = append(want, f...)
	}
	p := &Pending{Target: filepath.Join(base, "d", "s.zip")}
	require.NoError(t, os.Mkdir(filepath.Join(base, "d"), 0o755))
	require.NoError(t, p.Write(base, frames))
	require.NoError(t, p.Publish())
	got, err := os.ReadFile(p.Target)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// TestRelBeneathFastPathAgreesWithRel: the clean-prefix shortcut gives filepath.Rel's answer,
// and everything else still goes through the checks.
func TestRelBeneathFastPathAgreesWithRel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		base, path, rel string
		ok              bool
	}{
		{"/c", "/c/a/b.zip", "a/b.zip", true},
		{"/c/d", "/c/d/x", "x", true},
		{"/c", "/cd/x", "", false},
		{"/c", "/c", "", false},
		{"/c", "/c/", "", false},
		{"/c", "/c/..", "", false},
		{"/c", "/c/../x", "", false},
		{"/c", "/c/a/../../x", "", false},
		{"/c", "/c/a/../b", "b", true},
		{"/c", "/c//a", "a", true},
		{"/c/", "/c/a", "a", true},
		{"/", "/a", "a", true},
		{"c", "c/a", "", false},
		{"/c", "c/a", "", false},
	} {
		rel, err := relBeneath(c.base, c.path)
		if !c.ok {
			require.ErrorIs(t, err, errOutsideCorpus, "%s beneath %s", c.path, c.base)
			continue
		}
		require.NoError(t, err, "%s beneath %s", c.path, c.base)
		require.Equal(t, c.rel, rel, "%s beneath %s", c.path, c.base)
		want, err := filepath.Rel(c.base, c.path)
		require.NoError(t, err)
		require.Equal(t, want, rel)
	}
}

func requireFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, string(got))
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
