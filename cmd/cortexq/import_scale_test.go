package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeList writes entries to a list file, one a line.
func writeList(t *testing.T, entries []string) string {
	t.Helper()
	list := filepath.Join(t.TempDir(), "list")
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(entries, "\n")+"\n"), 0o644))
	return list
}

// An import streams its entries a batch at a time: a list of more than two batches goes in
// with a progress bar on stderr, and one refused entry at its end, after two batches were
// written, leaves nothing added.
func TestImportStreamsBatchesWithProgress(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	const n = 50000
	big := make([]string, n)
	for i := range big {
		big[i] = fmt.Sprintf("/corpus/p/%02d/p%05d.zip", i%100, i)
	}

	// The corpus exists with the path /corpus/p; a list whose last entry lies outside it is
	// refused whole.
	d.importList("c", "echo", big[:2]...)
	r := cortexq(t, d.env, "import", "--corpus", "c", "--service", "echo", "--from-list",
		writeList(t, append(big[2:], "/corpus/q/x.zip")))
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, `/corpus/q/x.zip is not beneath the path "/corpus/p" of corpus c: nothing imported`)
	require.Equal(t, 2, d.count(`SELECT count(*) FROM tasks`))

	r = cortexq(t, d.env, "import", "--corpus", "c", "--service", "echo", "--progress-every", "5ms", "--from-list", writeList(t, big))
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("%d tasks added, 2 already present", n-2))
	require.Equal(t, n, d.count(`SELECT count(*) FROM tasks`))
	require.Regexp(t, `(?m)^import \[[#.]{30}\]\s+\d+\.\d% [\d,]+/50,000 entries, \d+/s, \d+s$`, r.stderr, "a progress line (not a terminal)")

	// A walk: the count so far, no total.
	root := t.TempDir()
	for i := range 300 {
		dir := filepath.Join(root, fmt.Sprintf("d%d", i%10))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		touch(t, filepath.Join(dir, fmt.Sprintf("w%03d.zip", i)))
	}
	r = cortexq(t, d.env, "import", "--corpus", "w", "--service", "echo", "--progress-every", "1ms", root)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "corpus w (created), service echo: 300 tasks added")
	require.Regexp(t, `(?m)^import: [\d,]+ entries found and added so far, \d+/s, \d+s$`, r.stderr)

	// Without --progress-every, a short import prints no progress line.
	r = cortexq(t, d.env, "import", "--corpus", "w", "--service", "echo", root)
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stderr, "import")
}
