package cortexlog

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// realisticLog returns a LaTeXML-like log of 200 lines: loaded files, warnings and errors with
// continuation lines, progress notes, a runtime and a status line.
func realisticLog() []byte {
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "(Loading /usr/share/perl5/LaTeXML/Package/package%02d.sty.ltxml... 0.%02d sec)\n", i, i)
	}
	for i := range 52 { // 52 groups of 3 lines
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "Warning:expected:<number> Missing number, treated as zero\n\tat paper.tex; line %d col 4 - line %d col 9\n\tIn Core::Definition::Register[\\count%d]\n", i, i, i)
		case 1:
			fmt.Fprintf(&b, "Error:undefined:\\macro%d The token T_CS[\\macro%d] is not defined.\n\tat paper.tex; line %d col 1\nInfo:latexml:progress Processed section %d\n", i, i, i, i)
		default:
			fmt.Fprintf(&b, "Info:latexml:progress Processed section %d of the document body\n\n(Loading /home/paper/macros%d.sty... 0.01 sec)\n", i, i)
		}
	}
	b.WriteString("Info:runtime_ms:5321\nInfo:cortex:retryable\nStatus:conversion:2\nConversion complete: 1 error\n")
	return []byte(b.String())
}

func BenchmarkParseLog(b *testing.B) {
	log := realisticLog()
	if n := bytes.Count(log, []byte{'\n'}); n != 200 {
		b.Fatalf("log has %d lines, want 200", n)
	}
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	for b.Loop() {
		parseLog(log)
	}
}

func BenchmarkFromArchive(b *testing.B) {
	// cortex.log, the HTML output, telemetry, and a stored figure of hex digits that brings the
	// archive to about 8 KB.
	var figure strings.Builder
	for i := 0; figure.Len() < 6400; i++ {
		fmt.Fprintf(&figure, "%08x", uint32(i)*2654435761)
	}
	data := zipBytes(b,
		member{name: "cortex.log", body: string(realisticLog())},
		member{name: "paper.html", body: strings.Repeat("<p>Some converted text, <math>x^2</math>.</p>\n", 60)},
		member{name: "telemetry.json", body: `{"runtime_ms":5321}`},
		member{name: "figure.bin", body: figure.String(), store: true},
	)
	path := writeFile(b, data)
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	if info.Size() < 7<<10 || info.Size() > 9<<10 {
		b.Fatalf("archive of %d bytes, want about 8 KB", info.Size())
	}
	b.SetBytes(info.Size())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fromArchive(path, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
