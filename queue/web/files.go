package web

// A source archive's file (/task/N/file), and how pages open a task's archives.

import (
	"archive/zip"
	"errors"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/cortexlog"
	"github.com/cortexq/cortexq/queue/text"
)

// sourceFile shows a file of a task's source archive with numbered lines (each an anchor #LN),
// as the task page's "file; line N" links open it. name is a member's path, or the end of one.
func (s *Server) sourceFile(r *http.Request) (view, error) {
	h, err := s.history(r, -1)
	if err != nil {
		return view{}, err
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		return view{}, badRequest("name is required")
	}
	a, err := s.archivesOf(r, h)
	if err != nil {
		return view{}, err
	}
	zr, f, err := openZip(a.base, a.source)
	if err != nil {
		return view{}, httpError{code: http.StatusNotFound, msg: "task " + strconv.FormatInt(h.ID, 10) + ": no source archive readable here"}
	}
	defer f.Close()
	var member *zip.File
	for _, m := range zr.File {
		if m.Name == name || strings.HasSuffix(m.Name, "/"+path.Base(name)) && member == nil || path.Base(m.Name) == path.Base(name) && member == nil {
			member = m
			if m.Name == name {
				break
			}
		}
	}
	if member == nil {
		return view{}, httpError{code: http.StatusNotFound, msg: name + ": not in the source archive"}
	}
	rc, err := member.Open()
	if err != nil {
		return view{}, httpError{code: http.StatusNotFound, msg: member.Name + ": " + err.Error()}
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxSourceShown+1))
	rc.Close()
	if err != nil {
		return view{}, httpError{code: http.StatusNotFound, msg: member.Name + ": " + err.Error()}
	}
	cut := len(b) > maxSourceShown
	body, _ := htmlCut(text.PrintableLines(string(b[:min(len(b), maxSourceShown)])), maxSourceShown)
	var lines []sourceLine
	for i, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		lines = append(lines, sourceLine{N: i + 1, Text: l})
	}
	return view{Page: "file", Title: member.Name + " of task " + strconv.FormatInt(h.ID, 10), Data: struct {
		ID    int64
		Name  string
		Lines []sourceLine
		Cut   bool
	}{h.ID, member.Name, lines, cut}}, nil
}

// errNoArchive is the answer for a task with no archive of the kind asked for.
var errNoArchive = httpError{code: http.StatusNotFound, msg: "no archive"}

// openZip opens an archive beneath base (archive.Open: no path out of it) as a zip, with the
// checks every page that reads a member makes: a member name that climbs out of the archive
// is let through (pages check the names they use, validMember), more than
// cortexlog.MaxMembersDefault members are refused.
func openZip(base, p string) (*zip.Reader, *os.File, error) {
	if p == "" {
		return nil, nil, errNoArchive
	}
	f, err := archive.Open(base, p)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	zr, err := zip.NewReader(f, info.Size())
	if err != nil && !(errors.Is(err, zip.ErrInsecurePath) && zr != nil) {
		f.Close()
		return nil, nil, err
	}
	if len(zr.File) > cortexlog.MaxMembersDefault {
		f.Close()
		return nil, nil, errors.New("too many members")
	}
	return zr, f, nil
}
