package bench

import (
	"fmt"
	"io"

	"github.com/cortexq/cortexq/queue"
)

// LaTeXML-shaped logs for `cortexq bench --messages N`: what a real worker's cortex.log carries
// (docs/performance.md#messages). Each is made from the task's number alone, so a run is the
// same every time.

// benchPackages are the bindings a LaTeXML log reports loading: a few dozen, the first ones in
// nearly every paper.
var benchPackages = []string{
	"article.cls", "amsmath.sty", "amssymb.sty", "amsfonts.sty", "amsthm.sty", "graphicx.sty",
	"graphics.sty", "keyval.sty", "hyperref.sty", "url.sty", "color.sty", "xcolor.sty",
	"inputenc.sty", "fontenc.sty", "geometry.sty", "booktabs.sty", "natbib.sty", "cite.sty",
	"enumerate.sty", "enumitem.sty", "verbatim.sty", "bm.sty", "mathrsfs.sty", "latexsym.sty",
	"times.sty", "babel.sty", "array.sty", "multirow.sty", "subfigure.sty", "subcaption.sty",
	"caption.sty", "float.sty", "epsfig.sty", "revtex4-1.cls", "amsart.cls", "tikz.sty",
	"pgf.sty", "algorithm.sty", "algorithmic.sty", "listings.sty", "fancyhdr.sty", "textcomp.sty",
}

// benchMacros are the undefined macros of the logs' warnings and errors.
var benchMacros = []string{
	`\mathbbm`, `\bbR`, `\Tr`, `\diag`, `\qedhere`, `\citep`, `\eqref*`, `\pgfmathsetmacro`,
	`\SetKwInOut`, `\abs`, `\norm`, `\ket`, `\bra`, `\mathscr`, `\DeclareMathOperator*`,
	`\affiliation`, `\keywords`, `\subjclass`, `\thanks*`, `\institute`,
}

// benchRand is splitmix64: a task's log from its number, the same on every run.
type benchRand uint64

func (r *benchRand) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *benchRand) intn(n int) int { return int(r.next() % uint64(n)) }

// benchLogStatus is the status the log of task i with about n messages derives: Error for a
// third of the tasks, Warning for most of the rest, NoProblem otherwise (n 0: the one-line log,
// NoProblem).
func benchLogStatus(i, n int) queue.Status {
	if n <= 0 {
		return queue.StatusNoProblem
	}
	r := benchRand(i)
	switch r.next(); {
	case i%3 == 0:
		return queue.StatusError
	case r.intn(4) != 0:
		return queue.StatusWarning
	default:
		return queue.StatusNoProblem
	}
}

// writeBenchLog writes the cortex.log of task i: with n 0 one Info line and a NoProblem status
// line; else about n messages, most Info:loaded_file:<package>.ltxml with the binding's path,
// warnings where benchLogStatus says so, a few errors in a third of the tasks, then the status
// line.
func writeBenchLog(w io.Writer, i, n int) error {
	if n <= 0 {
		_, err := fmt.Fprintf(w, "Info:cortex:sample document %d\nStatus:conversion:0\n", i)
		return err
	}
	status := benchLogStatus(i, n)
	r := benchRand(i)
	r.next() // as benchLogStatus
	if i%3 != 0 {
		r.next()
	}
	warnings, errors := 0, 0
	switch status {
	case queue.StatusError:
		errors = 1 + r.intn(3)
		warnings = 1 + r.intn(max(1, n/10))
	case queue.StatusWarning:
		warnings = 1 + r.intn(max(1, n/10))
	}
	infos := max(0, n-warnings-errors)
	line := 1
	macro := func() string { return benchMacros[r.intn(len(benchMacros))] }
	for k := 0; k < infos; k++ {
		pkg := benchPackages[min(r.intn(len(benchPackages)), r.intn(len(benchPackages)))]
		if _, err := fmt.Fprintf(w, "Info:loaded_file:%s.ltxml /usr/share/perl5/LaTeXML/Package/%s.ltxml\n", pkg, pkg); err != nil {
			return err
		}
		// The warnings and errors come among the packages, as the document is read.
		if k%10 == 9 || k == infos-1 {
			for ; warnings > 0 && (r.intn(2) == 0 || k == infos-1); warnings-- {
				line += 1 + r.intn(40)
				m := macro()
				if _, err := fmt.Fprintf(w, "Warning:undefined:%s The token T_CS[%s] is not defined. at paper.tex; line %d col %d\n",
					m, m, line, 1+r.intn(70)); err != nil {
					return err
				}
			}
			for ; errors > 0 && (r.intn(3) == 0 || k == infos-1); errors-- {
				line += 1 + r.intn(40)
				if _, err := fmt.Fprintf(w, "Error:expected:\\end{%s} Expected \\end{document} at paper.tex; line %d col %d\n",
					[]string{"align", "equation", "proof", "figure"}[r.intn(4)], line, 1+r.intn(70)); err != nil {
					return err
				}
			}
		}
	}
	conversion := map[queue.Status]int{queue.StatusNoProblem: 0, queue.StatusWarning: 1, queue.StatusError: 2}[status]
	_, err := fmt.Fprintf(w, "Status:conversion:%d\n", conversion)
	return err
}
