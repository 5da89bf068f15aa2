package export_test

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/export"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/resultcorpus"
	"github.com/cortexq/cortexq/queue/reports"
)

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestExportByMonth exports a corpus of mixed severities by month: the manifest's counts equal
// the report's, each archive holds its group's entries once and matches its digest, a second run
// rewrites nothing, and a truncated archive is rebuilt.
func TestExportByMonth(t *testing.T) {
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	c := resultcorpus.Stage(ctx, t, pool, t.TempDir(), "arxiv", "tex_to_html", 400, 200)
	out := t.TempDir()
	req := export.Request{Corpus: c.Name, Service: c.Service, Out: out, GroupBy: export.ByMonth,
		Severities: []string{"no_problem", "warning", "error"}, Version: "test", PageSize: 37}
	sum, err := export.Run(ctx, pool, req)
	require.NoError(t, err)
	m := sum.Manifest
	require.Equal(t, len(m.Archives), sum.Written)

	statuses, err := reports.New(pool, nil, nil).ReportStatuses(ctx, queue.Scope{CorpusID: c.CorpusID, ServiceID: c.ServiceID})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"no_problem": statuses[queue.StatusNoProblem], "warning": statuses[queue.StatusWarning],
		"error": statuses[queue.StatusError]}, m.Counts)
	require.Zero(t, m.Missing)
	months := map[string]bool{}
	seen := map[string]bool{}
	monthOf := map[string]string{} // an entry's directory (its name in the archive) → its month
	for _, e := range c.Entries {
		monthOf[filepath.Base(filepath.Dir(e))] = export.Month(e)
	}
	for _, a := range m.Archives {
		months[a.Group] = true
		path := filepath.Join(out, a.Name)
		require.Equal(t, a.SHA256, fileSum(t, path), a.Name)
		zr, err := zip.OpenReader(path)
		require.NoError(t, err)
		require.Len(t, zr.File, int(a.Tasks), a.Name)
		for _, f := range zr.File {
			require.False(t, seen[f.Name], "duplicate %s", f.Name)
			seen[f.Name] = true
			require.Equal(t, a.Group, monthOf[strings.Split(f.Name, "/")[0]], f.Name)
		}
		require.NoError(t, zr.Close())
	}
	require.Len(t, seen, int(m.Counts["no_problem"]+m.Counts["warning"]+m.Counts["error"]), "no gap")
	require.True(t, months["unknown"] && months["2019-05"] && months["1997-03"], "months %v", months)

	// A second run rewrites nothing.
	mtimes := map[string]time.Time{}
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		mtimes[e.Name()] = info.ModTime()
	}
	again, err := export.Run(ctx, pool, req)
	require.NoError(t, err)
	require.Zero(t, again.Written)
	require.Equal(t, len(m.Archives), again.Kept)
	after, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, after, len(entries), "no file added or left behind")
	for _, e := range after {
		info, err := e.Info()
		require.NoError(t, err)
		require.Equal(t, mtimes[e.Name()], info.ModTime(), e.Name())
	}

	// A truncated archive is rebuilt, the others kept.
	victim := filepath.Join(out, m.Archives[1].Name)
	require.NoError(t, os.Truncate(victim, m.Archives[1].Bytes/2))
	third, err := export.Run(ctx, pool, req)
	require.NoError(t, err)
	require.Equal(t, 1, third.Written)
	require.Equal(t, m.Archives[1].SHA256, fileSum(t, victim))
	require.Equal(t, m.Counts, third.Manifest.Counts)
}

// TestExportHTMLBySeverity bundles only the HTML, one archive per severity; a manifest of another
// export in --out is refused, as are bad arguments.
func TestExportHTMLBySeverity(t *testing.T) {
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	c := resultcorpus.Stage(ctx, t, pool, t.TempDir(), "arxiv", "tex_to_html", 40, 50)
	out := t.TempDir()
	req := export.Request{Corpus: c.Name, Service: c.Service, Out: out, GroupBy: export.BySeverity,
		Severities: []string{"Fatal", "warning"}, HTML: true}
	sum, err := export.Run(ctx, pool, req)
	require.NoError(t, err)
	require.Len(t, sum.Manifest.Archives, 2)
	for _, a := range sum.Manifest.Archives {
		zr, err := zip.OpenReader(filepath.Join(out, a.Name))
		require.NoError(t, err)
		require.Len(t, zr.File, int(a.Tasks))
		for _, f := range zr.File {
			require.True(t, strings.HasSuffix(f.Name, ".html"), f.Name)
		}
		require.NoError(t, zr.Close())
	}
	req.GroupBy = export.ByNone
	_, err = export.Run(ctx, pool, req)
	require.ErrorContains(t, err, "another export")
	for _, bad := range []export.Request{
		{Corpus: c.Name, Service: c.Service, Out: out, GroupBy: "year", Severities: []string{"error"}},
		{Corpus: c.Name, Service: c.Service, Out: out, GroupBy: "none", Severities: []string{"bad"}},
		{Corpus: "nope", Service: c.Service, Out: t.TempDir(), GroupBy: "none", Severities: []string{"error"}},
	} {
		_, err := export.Run(ctx, pool, bad)
		require.Error(t, err)
	}
}
