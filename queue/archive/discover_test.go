package archive

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func touchFile(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, nil, 0o644))
}

func TestFindSources(t *testing.T) {
	services := map[string]bool{"echo": true, "tex_to_html": true}

	t.Run("SkipsResultArchivesAndCountsThem", func(t *testing.T) {
		root := t.TempDir()
		for _, name := range []string{"a/p1.zip", "a/echo.zip", "a/tex_to_html.zip", "a/echo.sandbox-12.zip", "a/notes.txt", "b/c/p2.zip"} {
			touchFile(t, filepath.Join(root, name))
		}
		s, err := FindSources([]string{root}, services)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{filepath.Join(root, "a/p1.zip"), filepath.Join(root, "b/c/p2.zip")}, s.Entries)
		require.Equal(t, 3, s.Skipped, "the three result archives; notes.txt is no archive")
		require.Empty(t, s.Links)
		require.Equal(t, root, s.Dir)
	})

	t.Run("DirIsTheDeepestDirectoryHoldingEveryRoot", func(t *testing.T) {
		parent := t.TempDir()
		first, second := filepath.Join(parent, "x", "one"), filepath.Join(parent, "x", "two")
		touchFile(t, filepath.Join(first, "p1.zip"))
		touchFile(t, filepath.Join(second, "p2.zip"))
		s, err := FindSources([]string{first, second}, services)
		require.NoError(t, err)
		require.Len(t, s.Entries, 2)
		require.Equal(t, filepath.Join(parent, "x"), s.Dir)

		// A single archive as a root: its directory holds it.
		s, err = FindSources([]string{filepath.Join(first, "p1.zip")}, services)
		require.NoError(t, err)
		require.Equal(t, []string{filepath.Join(first, "p1.zip")}, s.Entries)
		require.Equal(t, first, s.Dir)
	})

	t.Run("SymbolicLinksToFilesAreEntriesAndNoted", func(t *testing.T) {
		root := t.TempDir()
		touchFile(t, filepath.Join(root, "b", "real.zip"))
		require.NoError(t, os.MkdirAll(filepath.Join(root, "a"), 0o755))
		link := filepath.Join(root, "a", "source.zip")
		require.NoError(t, os.Symlink("../b/real.zip", link))
		require.NoError(t, os.Symlink("../b", filepath.Join(root, "a", "dir.zip"))) // a link to a directory is no entry
		s, err := FindSources([]string{root}, services)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{link, filepath.Join(root, "b", "real.zip")}, s.Entries)
		require.Equal(t, map[string]bool{link: true}, s.Links)
	})
}

func TestListSources(t *testing.T) {
	list := strings.Join([]string{"/corpus/a1/p.zip", "  a2/p.zip  ", "", "/corpus/a1/echo.zip",
		"/corpus/a1/echo.sandbox-3.zip", "/corpus/a1/readme", "/corpus/b/../a3/p.zip"}, "\n")
	s, err := ListSources(strings.NewReader(list), "/corpus", map[string]bool{"echo": true})
	require.NoError(t, err)
	require.Equal(t, []string{"/corpus/a1/p.zip", "/corpus/a2/p.zip", "/corpus/a3/p.zip"}, s.Entries)
	require.Equal(t, 3, s.Skipped, "two result archives and a file that is no archive; blank lines are not counted")
	require.Equal(t, "/corpus", s.Dir)
	require.Empty(t, s.Links, "listed files are not checked")

	s, err = ListSources(strings.NewReader("\n\n"), "/", nil)
	require.NoError(t, err)
	require.Empty(t, s.Entries)
	require.Empty(t, s.Dir)
}

func TestCheckBeneath(t *testing.T) {
	t.Run("EntryOutsideTheCorpusPathIsRefused", func(t *testing.T) {
		s := found{Entries: []string{"/data/c/one.zip", "/data/other/two.zip"}}
		require.NoError(t, s.CheckBeneath("c", "/data"))
		err := s.CheckBeneath("c", "/data/c")
		require.EqualError(t, err, `/data/other/two.zip is not beneath the path "/data/c" of corpus c: nothing imported (import it into a corpus of its own)`)
		require.Error(t, s.CheckBeneath("c", "relative/path"), "a corpus path that is not absolute holds nothing")
	})

	t.Run("SymbolicLinkOutOfTheCorpusIsRefused", func(t *testing.T) {
		root, outside := t.TempDir(), t.TempDir()
		secret := filepath.Join(outside, "secret")
		touchFile(t, secret)
		touchFile(t, filepath.Join(root, "b", "source.zip"))
		require.NoError(t, os.MkdirAll(filepath.Join(root, "a"), 0o755))
		link := filepath.Join(root, "a", "source.zip")
		require.NoError(t, os.Symlink(secret, link))
		s, err := FindSources([]string{root}, nil)
		require.NoError(t, err)
		err = s.CheckBeneath("c", root)
		require.ErrorContains(t, err, link+" is a symbolic link to "+secret)
		require.ErrorContains(t, err, "refused, nothing imported")
	})

	t.Run("SymbolicLinkWithinTheCorpusIsTaken", func(t *testing.T) {
		root := t.TempDir()
		touchFile(t, filepath.Join(root, "b", "real.zip"))
		require.NoError(t, os.MkdirAll(filepath.Join(root, "a"), 0o755))
		require.NoError(t, os.Symlink("../b/real.zip", filepath.Join(root, "a", "source.zip")))
		s, err := FindSources([]string{root}, nil)
		require.NoError(t, err)
		require.Len(t, s.Links, 1)
		require.NoError(t, s.CheckBeneath("c", root))
	})
}

func TestRoots(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	touchFile(t, filepath.Join(dir, "sub", "p.zip"))
	roots, err := Roots([]string{"sub", filepath.Join(dir, "sub", "p.zip")})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "p.zip")}, roots)

	_, err = Roots([]string{"sub", "missing"})
	require.EqualError(t, err, "missing: no such file or directory", "the path is named once")
}

// found collects what WalkSources or ScanList found, for the tests above.
type found struct {
	Entries []string
	Links   map[string]bool
	Skipped int
	Dir     string
}

func (s *found) add(e Entry) error {
	s.Entries = append(s.Entries, e.Path)
	if e.Link {
		s.Links[e.Path] = true
	}
	return nil
}

func FindSources(roots []string, services map[string]bool) (found, error) {
	s := found{Links: map[string]bool{}, Dir: RootsDir(roots)}
	var err error
	s.Skipped, err = WalkSources(roots, services, s.add)
	return s, err
}

func ListSources(r io.Reader, cwd string, services map[string]bool) (found, error) {
	s := found{Links: map[string]bool{}}
	var dir ListDir
	var err error
	s.Skipped, err = ScanList(r, cwd, services, func(e Entry) error { dir.Add(e); return s.add(e) })
	s.Dir = dir.Dir()
	if len(s.Links) == 0 {
		s.Links = nil
	}
	return s, err
}

// CheckBeneath checks every entry as an import does, stopping at the first refused.
func (s found) CheckBeneath(corpus, corpusPath string) error {
	b := NewBeneath(corpus, corpusPath)
	defer b.Close()
	for _, e := range s.Entries {
		if err := b.Check(Entry{Path: e, Link: s.Links[e]}); err != nil {
			return err
		}
	}
	return nil
}

// Sources from a list are read twice: Scan finds the corpus path and the count, Each adds them
// beneath it; a list with only result archives, or a walk that finds none, is a NoSourcesError.
func TestSourcesOfAListAndOfAWalk(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list")
	require.NoError(t, os.WriteFile(list, []byte("/data/c/a/one.zip\n/data/c/b/two.zip\n/data/c/b/echo.zip\n"), 0o600))
	s, err := OpenSources(nil, list)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Scan(map[string]bool{"echo": true}))
	require.Equal(t, "/data/c", s.Dir)
	require.EqualValues(t, 2, s.Total)
	var got []string
	require.NoError(t, s.Each("c", s.Dir, func(p string) error { got = append(got, p); return nil }))
	require.Equal(t, []string{"/data/c/a/one.zip", "/data/c/b/two.zip"}, got)
	require.Equal(t, 1, s.Skipped)
	require.ErrorContains(t, s.Each("c", "/data/c/a", func(string) error { return nil }), "/data/c/b/two.zip is not beneath")

	only := filepath.Join(dir, "only")
	require.NoError(t, os.WriteFile(only, []byte("/data/c/echo.zip\n"), 0o600))
	s, err = OpenSources(nil, only)
	require.NoError(t, err)
	defer s.Close()
	var none *NoSourcesError
	require.ErrorAs(t, s.Scan(map[string]bool{"echo": true}), &none)
	require.Equal(t, NoSourcesError{What: only, Skipped: 1}, *none)

	walk, err := OpenSources([]string{t.TempDir()}, "")
	require.NoError(t, err)
	require.NoError(t, walk.Scan(nil))
	require.EqualValues(t, -1, walk.Total)
	require.ErrorAs(t, walk.Each("c", walk.Dir, func(string) error { return nil }), &none)
}
