package latexml

import (
	"archive/zip"
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/cortexq/cortexq/queue"
)

//go:embed samples
var samplesFS embed.FS

// Sample is one of the small papers the project ships to show and test the LaTeXML path.
type Sample struct {
	// Name is the sample's directory under samples/, and the name of its source archive.
	Name string
	// About says what it exercises.
	About string
	// Want is the status LaTeXML 0.8.7 (Debian's) gives it through this worker.
	Want queue.Status
	// WantMessage is a message its cortex.log carries, as severity:category:what (empty: none
	// in particular).
	WantMessage string
}

// Samples are the sample papers, in the order the demo shows them.
var Samples = []Sample{
	{Name: "sections_math", About: "sections, cross-references and display math; main.tex inputs sections/intro.tex", Want: queue.StatusNoProblem,
		WantMessage: "info:loaded_file:amsmath.sty.ltxml"},
	{Name: "bibliography", About: "citations and a BibTeX bibliography (refs.bib)", Want: queue.StatusNoProblem,
		WantMessage: "info:cortexq:main_tex"},
	{Name: "undefined_macro", About: `a macro nobody defined (\foo)`, Want: queue.StatusError,
		WantMessage: `error:undefined:\foo`},
	{Name: "missing_package", About: "a package that exists nowhere (cortexqmissing)", Want: queue.StatusWarning,
		WantMessage: "warning:missing_file:cortexqmissing"},
	{Name: "many_errors", About: "120 undefined macros: LaTeXML gives up after 100 errors", Want: queue.StatusFatal,
		WantMessage: "fatal:too_many_errors:100"},
	{Name: "no_tex", About: "a README and a figure, no .tex at all", Want: queue.StatusInvalid,
		WantMessage: "invalid:no_tex:all"},
}

// Zip returns the sample's source archive: its files, paths relative to its directory.
func (s Sample) Zip() ([]byte, error) {
	root := path.Join("samples", s.Name)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err := fs.WalkDir(samplesFS, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := samplesFS.ReadFile(p)
		if err != nil {
			return err
		}
		// A fixed time: the same sample gives the same archive.
		w, err := zw.CreateHeader(&zip.FileHeader{Name: p[len(root)+1:], Method: zip.Deflate,
			Modified: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("sample %s: %w", s.Name, err)
	}
	return buf.Bytes(), nil
}
