package archive

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// What a crash leaves beside result archives — the temp archives and the earlier archives kept
// aside, named by the sink itself — is swept by the replica's next process; the files of
// another live replica stay unless they are older than the orphan age; nothing else is touched,
// and nothing outside the corpus.
func TestSweepRemovesOnlyLeftoversNoLiveClaimNeeds(t *testing.T) {
	t.Parallel()
	base, outside := t.TempDir(), t.TempDir()
	entry := filepath.Join(base, "a", "paper.zip")
	target := filepath.Join(base, "a", "echo.zip")
	require.NoError(t, os.MkdirAll(filepath.Dir(entry), 0o755))
	for _, p := range []string{entry, target} {
		require.NoError(t, os.WriteFile(p, []byte("kept"), 0o644))
	}
	now := time.Now()
	old := now.Add(-48 * time.Hour)

	// files writes, as the sink of a process of replica would, a temp archive and a publish's
	// kept earlier archive, as a crash between publish and the claim's end leaves them.
	files := func(replica string, task int64) (tmp, prev string) {
		tag := NewTag(replica)
		unclaimed := &Pending{Target: target, TaskID: task, Tag: tag}
		require.NoError(t, unclaimed.Write(base, [][]byte{[]byte("unclaimed")}))
		p := &Pending{Target: target, TaskID: task, Tag: tag}
		require.NoError(t, p.Write(base, [][]byte{[]byte("published")}))
		require.NoError(t, p.Publish())
		require.NotEmpty(t, p.backup)
		return unclaimed.tmp, p.backup
	}
	deadTmp, deadPrev := files("replica-1", 7)     // replica-1's earlier process, killed
	liveTmp, livePrev := files("replica-2", 8)     // replica-2, alive: its claim may go on
	goneTmp, gonePrev := files("replica/old 3", 9) // a replica gone for good, long ago
	legacyNew := filepath.Join(base, "a", ".echo.zip.tmp-0123abcd")
	legacyOld := filepath.Join(base, "a", ".echo.zip.prev-12-0123abcd")
	notOurs := filepath.Join(base, "a", ".echo.zip.tmp-notes.txt")
	for _, p := range []string{legacyNew, legacyOld, notOurs} {
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	for _, p := range []string{goneTmp, gonePrev, legacyOld, notOurs} {
		require.NoError(t, os.Chtimes(p, old, old))
	}
	// Links: neither followed out of the corpus nor removed themselves.
	outsideOld := filepath.Join(outside, ".echo.zip.tmp-0123abcd")
	require.NoError(t, os.WriteFile(outsideOld, nil, 0o644))
	require.NoError(t, os.Chtimes(outsideOld, old, old))
	require.NoError(t, os.Symlink(outside, filepath.Join(base, "b")))
	linkNamedLikeTmp := filepath.Join(base, "a", ".echo.zip.tmp-ffff")
	require.NoError(t, os.Symlink(outsideOld, linkNamedLikeTmp))

	rel := func(ps ...string) []string {
		var out []string
		for _, p := range ps {
			r, err := filepath.Rel(base, p)
			require.NoError(t, err)
			out = append(out, r)
		}
		sort.Strings(out)
		return out
	}
	sorted := func(ps []string) []string { sort.Strings(ps); return ps }
	exist := func(ps ...string) {
		t.Helper()
		for _, p := range ps {
			_, err := os.Lstat(p)
			require.NoError(t, err, p)
		}
	}

	// replica-1 starts again: a new incarnation.
	restarted := NewTag("replica-1")
	cfg := SweepConfig{Replica: "replica-1", Incarnation: restarted.incarnation,
		OrphanAge: 24 * time.Hour, NowFunc: func() time.Time { return now }}

	dry := cfg
	dry.DryRun = true
	st, err := Sweep(context.Background(), base, dry)
	require.NoError(t, err)
	want := rel(deadTmp, deadPrev, goneTmp, gonePrev, legacyOld)
	require.Equal(t, want, sorted(st.Removed))
	exist(deadTmp, deadPrev, goneTmp, gonePrev, legacyOld)

	st, err = Sweep(context.Background(), base, cfg)
	require.NoError(t, err)
	require.Equal(t, want, sorted(st.Removed))
	require.Zero(t, st.Failed)
	for _, p := range []string{deadTmp, deadPrev, goneTmp, gonePrev, legacyOld} {
		require.NoFileExists(t, p)
	}
	exist(entry, target, liveTmp, livePrev, legacyNew, notOurs, outsideOld, linkNamedLikeTmp)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "published", string(b), "the published archives stay")

	// A process sweeping with its own incarnation keeps its own files; without an orphan age,
	// only the replica's earlier processes' files go.
	mine := &Pending{Target: target, Tag: restarted}
	require.NoError(t, mine.Write(base, [][]byte{[]byte("mine")}))
	myTmp := mine.tmp
	require.NoError(t, os.Chtimes(myTmp, old, old))
	st, err = Sweep(context.Background(), base, SweepConfig{Replica: "replica-1", Incarnation: restarted.incarnation})
	require.NoError(t, err)
	require.Empty(t, st.Removed)
	exist(myTmp, liveTmp, livePrev)

	// The walk is bounded.
	_, err = Sweep(context.Background(), base, SweepConfig{Replica: "replica-1", MaxEntries: 2})
	require.ErrorIs(t, err, errSweepBound)
}

// A replica's name is carried into file names only as a safe tag, and two names never share one.
func TestFileTagNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, tag string }{
		{"replica-1", "replica-1"},
		{"host_2-1234", "host_2-1234"},
		{"a/../b", "a____b_"},
		{"a.b", "a_b_"},
		{"", "_"},
	} {
		got := tagReplica(tc.name)
		require.Regexp(t, `^[A-Za-z0-9_-]{1,40}$`, got)
		require.Truef(t, len(got) >= len(tc.tag) && got[:len(tc.tag)] == tc.tag, "%q: %q", tc.name, got)
		require.Equal(t, got, tagReplica(got), "a tag is its own tag")
	}
	require.NotEqual(t, tagReplica("a.b"), tagReplica("a/b"))
	require.Len(t, tagReplica(string(make([]byte, 300))), 40)
	for _, n := range []string{".echo.zip.tmp-0123", ".echo.zip.prev-5-ff", ".echo.zip.tmp-replica-1.0a0b0c0d-ff",
		".echo.sandbox-3.zip.prev-r-2.0a0b0c0d-17-ff"} {
		_, ok := parseLeftover(n)
		require.True(t, ok, n)
	}
	tag, _ := parseLeftover(".echo.sandbox-3.zip.prev-r-2.0a0b0c0d-17-ff")
	require.Equal(t, Tag{replica: "r-2", incarnation: "0a0b0c0d"}, tag)
	for _, n := range []string{"echo.zip", ".echo.zip.tmp-", ".echo.zip.prev-ff", "echo.zip.tmp-01"} {
		_, ok := parseLeftover(n)
		require.False(t, ok, n)
	}
}

// A paced sweep visits no more entries than its pace allows: cancelled after a fifth of a
// second at 1,000 entries a second, it has visited at most the first step of a corpus of
// 2,001 entries, and stops with the context's error (a slower machine visits fewer still).
func TestSweepKeepsItsPace(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for i := range 1000 {
		dir := filepath.Join(base, fmt.Sprintf("%04d", i))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "paper.zip"), nil, 0o644))
	}
	st, err := Sweep(context.Background(), base, SweepConfig{Replica: "r1", Incarnation: "a"})
	require.NoError(t, err)
	require.Equal(t, 2001, st.Visited, "unpaced: every directory and file, and the corpus itself")

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	st, err = Sweep(ctx, base, SweepConfig{Replica: "r1", Incarnation: "a", Pace: 1000})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.LessOrEqual(t, st.Visited, 2*sweepStep, "0.2 s at 1,000 a second: the first step, and the look that waited")
}
