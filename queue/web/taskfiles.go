package web

// A task's files: its archives downloaded, and the result's members previewed on their own host.

import (
	"archive/zip"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue/archive"
)

// download serves a task's source (result false) or result archive as an attachment.
func (s *Server) download(result bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h, a, err := s.taskArchives(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		p, what := a.source, "source"
		if result {
			p, what = a.result, "result"
		}
		f, err := archive.Open(a.base, p)
		if err != nil || p == "" {
			s.fail(w, r, httpError{code: http.StatusNotFound, msg: "task " + strconv.FormatInt(h.ID, 10) + ": no " + what + " archive readable here"})
			return
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		longWrite(w)
		name := "task-" + strconv.FormatInt(h.ID, 10) + "-" + what + ".zip"
		w.Header().Set("Content-Type", "application/zip")
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
		http.ServeContent(w, r, name, info.ModTime(), f)
	}
}

// openResult opens a task's result archive as a zip (openZip).
func openResult(a archives) (*zip.Reader, *os.File, error) { return openZip(a.base, a.result) }

// previewMember picks the HTML page of a result archive: index.html, else the shortest *.html.
func previewMember(a archives) string {
	zr, f, err := openResult(a)
	if err != nil {
		return ""
	}
	defer f.Close()
	var pages []string
	for _, m := range zr.File {
		if strings.HasSuffix(strings.ToLower(m.Name), ".html") && validMember(m.Name) {
			pages = append(pages, m.Name)
		}
	}
	sort.Slice(pages, func(i, j int) bool {
		if (path.Base(pages[i]) == "index.html") != (path.Base(pages[j]) == "index.html") {
			return path.Base(pages[i]) == "index.html"
		}
		if len(pages[i]) != len(pages[j]) {
			return len(pages[i]) < len(pages[j])
		}
		return pages[i] < pages[j]
	})
	if len(pages) == 0 {
		return ""
	}
	return pages[0]
}

func validMember(name string) bool {
	return name != "" && !strings.HasPrefix(name, "/") && !strings.Contains(name, "\\") &&
		path.Clean(name) == name && !strings.HasPrefix(name, "../") && name != ".."
}

// longWrite gives a download longer than the server's WriteTimeout.
func longWrite(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(30 * time.Minute))
}

// scriptTypes are the media types a browser would run as script (or as a worker's, or a
// manifest's): the dashboard's origin never serves a result's file as one of them.
var scriptTypes = []string{"javascript", "ecmascript", "jscript", "livescript", "wasm", "x-shockwave-flash",
	"manifest"}

// previewType is the media type a preview member is served with. On the dashboard's origin no
// script type (a worker's x.js is text/plain: a script tag in the sandboxed preview does not run
// it, and nothing on the dashboard's pages could), and no type unknown to Go's table.
func (s *Server) previewType(member string) string {
	ct := mime.TypeByExtension(filepath.Ext(member))
	if ct == "" {
		return "application/octet-stream"
	}
	if s.previewURL != nil {
		return ct
	}
	lower := strings.ToLower(ct)
	for _, t := range scriptTypes {
		if strings.Contains(lower, t) {
			return "text/plain; charset=utf-8"
		}
	}
	return ct
}

// framed reports whether a request for a preview comes from a frame or as a frame's own
// resource (an image, a style sheet), by its Sec-Fetch-Dest: not a tab of its own. A request
// without Fetch Metadata (an old browser, curl) counts as a tab.
func framed(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Dest") {
	case "", "document", "embed", "object":
		return false
	}
	return true
}

// onPreviewHost reports whether a request reached the preview origin's host.
func (s *Server) onPreviewHost(r *http.Request) bool {
	host := r.Host
	if fwd := r.Header.Get("X-Forwarded-Host"); fwd != "" {
		host = fwd
	}
	return s.previewURL != nil && strings.EqualFold(host, s.previewURL.Host)
}

// preview serves a member of a tex_to_html result archive, sandboxed: CSP sandbox without
// allow-same-origin gives the document an opaque origin, whatever frame or tab it is opened in.
// With a preview origin, from there only. Without one, from the dashboard's origin: as an
// attachment when opened outside a frame (a hostile result posing as a dashboard page in a tab
// of its own is downloaded instead), and never with a script type.
func (s *Server) preview(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", previewCSP)
	h.Set("X-Frame-Options", "SAMEORIGIN")
	if s.previewURL != nil {
		if !s.onPreviewHost(r) {
			http.Redirect(w, r, s.cfg.PreviewOrigin+r.URL.EscapedPath(), http.StatusFound)
			return
		}
		// Framed by the dashboard, whose origin this one does not know.
		h.Set("Content-Security-Policy", strings.Replace(previewCSP, "frame-ancestors 'self'", "frame-ancestors *", 1))
		h.Del("X-Frame-Options")
	} else if !framed(r) {
		h.Set("Content-Disposition", "attachment")
	}
	hist, err := s.history(r, -1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if hist.Service != previewService {
		s.fail(w, r, httpError{code: http.StatusNotFound, msg: "only " + previewService + " results have a preview"})
		return
	}
	member := r.PathValue("member")
	if !validMember(member) {
		s.fail(w, r, badRequest("member %q: not a member path", member))
		return
	}
	a, err := s.archivesOf(r, hist)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	zr, f, err := openResult(a)
	if err != nil {
		s.fail(w, r, httpError{code: http.StatusNotFound, msg: "no result archive readable here"})
		return
	}
	defer f.Close()
	for _, m := range zr.File {
		if m.Name != member || m.UncompressedSize64 > maxPreviewMember {
			continue
		}
		rc, err := m.Open()
		if err != nil {
			s.fail(w, r, httpError{code: http.StatusNotFound, msg: member + ": " + err.Error()})
			return
		}
		defer rc.Close()
		h.Set("Content-Type", s.previewType(member))
		h.Set("Cache-Control", "no-store")
		longWrite(w)
		_, _ = io.Copy(w, io.LimitReader(rc, maxPreviewMember))
		return
	}
	s.fail(w, r, httpError{code: http.StatusNotFound, msg: member + ": not in the result archive"})
}
