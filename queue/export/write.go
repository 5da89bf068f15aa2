package export

import (
	"archive/zip"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cortexq/cortexq/queue/archive"
)

// exporter writes the groups' archives and the manifest.
type exporter struct {
	req   Request
	src   source
	spool string
	old   *Manifest
	total int64
	done  int64
	sum   Summary
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.+-]+`)

// archiveName is the file name of a group's archive.
func (e *exporter) archiveName(g string) string {
	return unsafeName.ReplaceAllString(e.req.Corpus+"_"+e.req.Service+"_"+g, "-") + ".zip"
}

func (e *exporter) progress(n int64) {
	e.done += n
	if e.req.Progress != nil {
		e.req.Progress(e.done, e.total)
	}
}

// write builds each group's archive unless complete already, and the manifest when it changed.
func (e *exporter) write(ctx context.Context, groups map[string]*group) (Summary, error) {
	m := Manifest{Corpus: e.req.Corpus, Service: e.req.Service, Run: e.src.run, Severities: e.req.Severities,
		GroupBy: e.req.GroupBy, HTML: e.req.HTML, Version: e.req.Version, Counts: map[string]int64{}, Archives: []Archive{}}
	kept := map[string]Archive{}
	if e.old != nil {
		for _, a := range e.old.Archives {
			kept[a.Name] = a
		}
		m.Version = e.old.Version // the version that wrote what is kept, until an archive is rewritten
	}
	if e.req.Progress != nil {
		e.req.Progress(0, e.total)
	}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		g := groups[name]
		a, ok := kept[e.archiveName(name)]
		if !ok || !e.complete(a, g) {
			var err error
			if a, err = e.build(ctx, g); err != nil {
				return e.sum, err
			}
			m.Version = e.req.Version
			e.sum.Written++
			e.sum.Bytes += a.Bytes
		} else {
			e.sum.Kept++
			e.progress(g.tasks)
		}
		m.Archives = append(m.Archives, a)
		for s, n := range a.Counts {
			m.Counts[s] += n
		}
		m.Missing += a.Missing
		if e.sum.Written > 0 { // the manifest lists each archive as soon as it is complete
			if err := writeManifest(e.req.Out, m); err != nil {
				return e.sum, err
			}
		}
	}
	e.sum.Manifest = m
	if e.sum.Written == 0 && (e.old == nil || len(e.old.Archives) != len(m.Archives) || e.old.Run != m.Run) {
		if err := writeManifest(e.req.Out, m); err != nil {
			return e.sum, err
		}
	}
	return e.sum, nil
}

// complete reports whether archive a, listed in the manifest, is whole and holds group g.
func (e *exporter) complete(a Archive, g *group) bool {
	if a.Tasks != g.tasks || !maps.Equal(a.Counts, g.counts) {
		return false
	}
	st, err := os.Stat(filepath.Join(e.req.Out, a.Name))
	return err == nil && st.Mode().IsRegular() && st.Size() == a.Bytes
}

// countingWriter counts and hashes what goes through it.
type countingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// build writes group g's archive aside, then renames it into place.
func (e *exporter) build(ctx context.Context, g *group) (Archive, error) {
	a := Archive{Name: e.archiveName(g.name), Group: g.name, Tasks: g.tasks, Counts: g.counts}
	final := filepath.Join(e.req.Out, a.Name)
	tmp := filepath.Join(e.req.Out, "."+a.Name+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return a, fmt.Errorf("export: %w", err)
	}
	defer func() { _ = os.Remove(tmp) }() // after the rename, nothing is there
	cw := &countingWriter{w: f, h: sha256.New()}
	bw := bufio.NewWriterSize(cw, 256<<10)
	zw := zip.NewWriter(bw)
	err = e.fill(ctx, zw, g, &a)
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		return a, fmt.Errorf("export: archive %s: %w", a.Name, err)
	}
	a.Bytes, a.SHA256 = cw.n, hex.EncodeToString(cw.h.Sum(nil))
	return a, nil
}

// fill adds group g's results to zw, reading its spool.
func (e *exporter) fill(ctx context.Context, zw *zip.Writer, g *group, a *Archive) error {
	sf, err := os.Open(filepath.Join(e.spool, g.name+".spool"))
	if err != nil {
		return err
	}
	defer func() { _ = sf.Close() }()
	sc := bufio.NewScanner(sf)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, quoted, ok := strings.Cut(sc.Text(), "\t")
		entry, uerr := strconv.Unquote(quoted)
		if !ok || uerr != nil {
			return fmt.Errorf("spool of %s: bad line", g.name)
		}
		n, err := e.add(zw, entry)
		if err != nil {
			return err
		}
		if n == 0 {
			a.Missing++
		}
		a.Files += int64(n)
		e.progress(1)
	}
	return sc.Err()
}

// add adds an entry's result to zw (the archive, or its HTML files) and returns how many files
// it added: 0 when the result archive is missing or, for its HTML, unreadable.
func (e *exporter) add(zw *zip.Writer, entry string) (int, error) {
	res := archive.ResultPath(e.src.corpusPath, entry, e.req.Service, e.src.sandbox)
	if res == "" {
		return 0, nil
	}
	rel := e.relDir(entry)
	if e.req.HTML {
		return addHTML(zw, res, rel)
	}
	f, err := os.Open(res)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	w, err := zw.CreateHeader(&zip.FileHeader{Name: rel + "/" + filepath.Base(res), Method: zip.Store, Modified: st.ModTime()})
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(w, f); err != nil {
		return 0, err
	}
	return 1, nil
}

// relDir names an entry's directory in the export: relative to the corpus's path.
func (e *exporter) relDir(entry string) string {
	dir := filepath.Dir(entry)
	rel, err := filepath.Rel(e.src.corpusPath, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return filepath.Base(dir)
	}
	return filepath.ToSlash(rel)
}

// addHTML adds the HTML files of result archive res under rel.
func addHTML(zw *zip.Writer, res, rel string) (int, error) {
	r, err := zip.OpenReader(res)
	if err != nil {
		return 0, nil // missing or not a ZIP: counted missing
	}
	defer func() { _ = r.Close() }()
	n := 0
	for _, f := range r.File {
		name := path.Clean("/" + f.Name)[1:]
		switch strings.ToLower(path.Ext(name)) {
		case ".html", ".xhtml", ".htm":
		default:
			continue
		}
		if f.FileInfo().IsDir() || name == "" {
			continue
		}
		src, err := f.Open()
		if err != nil {
			continue
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: rel + "/" + name, Method: zip.Deflate, Modified: f.Modified})
		if err == nil {
			_, err = io.Copy(w, src)
		}
		_ = src.Close()
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
