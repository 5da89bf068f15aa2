package latexml

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/cortexlog"
	"github.com/cortexq/cortexq/worker/sandbox"
)

// needLatexmlc skips a test when latexmlc is not installed, except under CI, where
// scripts/install-deps installs it and its absence is a failure.
func needLatexmlc(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(LatexmlcDefault); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("latexmlc is required under CI (scripts/install-deps installs latexml): %v", err)
		}
		t.Skipf("latexmlc not installed (apt-get install latexml): %v", err)
	}
}

// makeZip builds a zip of the given members; a name ending in / is a directory, a member whose
// body starts with "symlink:" a symbolic link to the rest.
func makeZip(t *testing.T, members ...[2]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		h := &zip.FileHeader{Name: m[0], Method: zip.Deflate}
		body := m[1]
		if target, ok := strings.CutPrefix(body, "symlink:"); ok {
			h.SetMode(os.ModeSymlink | 0o777)
			body = target
		}
		w, err := zw.CreateHeader(h)
		require.NoError(t, err)
		_, err = io.WriteString(w, body)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	p := filepath.Join(t.TempDir(), "src.zip")
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	return p
}

func TestUnpack(t *testing.T) {
	t.Parallel()
	invalid := func(t *testing.T, err error, category string) {
		t.Helper()
		var inv *InvalidError
		require.ErrorAs(t, err, &inv)
		require.Equal(t, category, inv.Category, inv.Details)
	}
	// nothingOutside checks that the unpack wrote nothing beside its directory.
	unpack := func(t *testing.T, src string, lim Limits) (string, []string, error) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "src")
		require.NoError(t, os.Mkdir(dir, 0o755))
		skipped, err := Unpack(src, dir, lim)
		entries, rerr := os.ReadDir(parent)
		require.NoError(t, rerr)
		require.Len(t, entries, 1, "nothing is written beside the unpack directory")
		return dir, skipped, err
	}

	t.Run("RegularTreeIsUnpacked", func(t *testing.T) {
		t.Parallel()
		dir, skipped, err := unpack(t, makeZip(t, [2]string{"main.tex", "hello"}, [2]string{"sec/", ""},
			[2]string{"sec/a.tex", "a"}, [2]string{"fig/x/y.png", "png"}), Limits{})
		require.NoError(t, err)
		require.Empty(t, skipped)
		for name, body := range map[string]string{"main.tex": "hello", "sec/a.tex": "a", "fig/x/y.png": "png"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			require.Equal(t, body, string(b))
		}
	})
	for _, name := range []string{"../evil.tex", "a/../../evil.tex", "/etc/evil.tex", `..\evil.tex`, "a/./b.tex", "a//b.tex", "C:/evil.tex"} {
		t.Run("ZipSlipRefused/"+name, func(t *testing.T) {
			t.Parallel()
			_, _, err := unpack(t, makeZip(t, [2]string{"main.tex", "ok"}, [2]string{name, "evil"}), Limits{})
			if name == "C:/evil.tex" {
				// On Unix C: is a plain directory name: it stays beneath the directory.
				require.NoError(t, err)
				return
			}
			invalid(t, err, InvalidUnsafe)
		})
	}
	t.Run("SymlinkIsSkippedNotFollowed", func(t *testing.T) {
		t.Parallel()
		dir, skipped, err := unpack(t, makeZip(t, [2]string{"link", "symlink:/etc"}, [2]string{"main.tex", "x"}), Limits{})
		require.NoError(t, err)
		require.Equal(t, []string{"link"}, skipped)
		_, err = os.Lstat(filepath.Join(dir, "link"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("DuplicateMemberRefused", func(t *testing.T) {
		t.Parallel()
		_, _, err := unpack(t, makeZip(t, [2]string{"main.tex", "a"}, [2]string{"main.tex", "b"}), Limits{})
		invalid(t, err, InvalidUnsafe)
	})
	t.Run("OversizeRefusedAsItInflates", func(t *testing.T) {
		t.Parallel()
		// 100 members of 1 MiB of zeros: 100 MiB inflated from a few hundred KiB, over a 64 MiB cap.
		members := make([][2]string, 100)
		zeros := strings.Repeat("\x00", 1<<20)
		for i := range members {
			members[i] = [2]string{fmt.Sprintf("z%03d.bin", i), zeros}
		}
		src := makeZip(t, members...)
		fi, err := os.Stat(src)
		require.NoError(t, err)
		require.Less(t, fi.Size(), int64(1<<20), "the bomb is small")
		dir, _, err := unpack(t, src, Limits{MaxBytes: 64 << 20})
		invalid(t, err, InvalidTooLarge)
		var total int64
		require.NoError(t, filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				total += fi.Size()
			}
			return err
		}))
		require.LessOrEqual(t, total, int64(64<<20)+1, "at most the limit (and one byte) is written")
	})
	t.Run("ExactlyAtTheLimitIsFine", func(t *testing.T) {
		t.Parallel()
		_, _, err := unpack(t, makeZip(t, [2]string{"a.tex", strings.Repeat("a", 600)}, [2]string{"b.tex", strings.Repeat("b", 400)}), Limits{MaxBytes: 1000})
		require.NoError(t, err)
		_, _, err = unpack(t, makeZip(t, [2]string{"a.tex", strings.Repeat("a", 600)}, [2]string{"b.tex", strings.Repeat("b", 401)}), Limits{MaxBytes: 1000})
		invalid(t, err, InvalidTooLarge)
	})
	t.Run("TooManyMembersRefused", func(t *testing.T) {
		t.Parallel()
		_, _, err := unpack(t, makeZip(t, [2]string{"a", ""}, [2]string{"b", ""}, [2]string{"c", ""}), Limits{MaxFiles: 2})
		invalid(t, err, InvalidTooLarge)
	})
	t.Run("NotAZipIsUnreadable", func(t *testing.T) {
		t.Parallel()
		p := filepath.Join(t.TempDir(), "x.zip")
		require.NoError(t, os.WriteFile(p, []byte("\\documentclass{article}"), 0o644))
		_, _, err := unpack(t, p, Limits{})
		invalid(t, err, InvalidUnreadable)
	})
}

func TestFindMain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		files    map[string]string
		want     string
		category string
	}{
		{"OnlyOneWithAClass", map[string]string{"intro.tex": "text", "paper.tex": "\\documentclass{article}", "z.sty": ""}, "paper.tex", ""},
		{"CommentedClassDoesNotCount", map[string]string{"a.tex": "% \\documentclass{article}", "b.tex": "  \\documentclass[12pt]{revtex4}"}, "b.tex", ""},
		{"EscapedPercentIsNoComment", map[string]string{"a.tex": "50\\% \\documentclass{article}", "b.tex": "x"}, "a.tex", ""},
		{"DocumentstyleCounts", map[string]string{"old.tex": "\\documentstyle{article}", "b.tex": "x"}, "old.tex", ""},
		{"PreferredNameWins", map[string]string{"a.tex": "\\documentclass{article}", "sub/ms.tex": "\\documentclass{article}", "MAIN.TEX": "\\documentclass{article}"}, "MAIN.TEX", ""},
		{"ShallowestThenByPath", map[string]string{"x/y/a.tex": "\\documentclass{article}", "x/b.tex": "\\documentclass{article}", "x/c.tex": "\\documentclass{x}"}, "x/b.tex", ""},
		{"SingleTexWithoutClass", map[string]string{"plain.tex": "\\bye", "README": ""}, "plain.tex", ""},
		{"NoTeX", map[string]string{"README.txt": "\\documentclass{article}", "fig.eps": ""}, "", InvalidNoTeX},
		{"SeveralWithoutClass", map[string]string{"a.tex": "x", "b.tex": "y"}, "", InvalidNoMain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, body := range tc.files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
			}
			got, err := FindMain(dir)
			if tc.category != "" {
				var inv *InvalidError
				require.ErrorAs(t, err, &inv)
				require.Equal(t, tc.category, inv.Category)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// latexmlLog is a LaTeXML 0.8.7 log, cut down: progress, messages with their details, a
// recursive conversion's status and the final one.
const latexmlLog = `(Loading /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml...
(Loading /usr/share/perl5/LaTeXML/Package/eTeX.pool.ltxml... 0.00 sec)
latexmlc (LaTeXML version 0.8.7)
invoked as [/usr/bin/latexmlc --format=html5 --dest=out/main.html --log=latexml.log main.tex]
processing started Fri Dec  4 13:52:46 2026
(Loading /usr/share/perl5/LaTeXML/Package/article.cls.ltxml... 0.02 sec)
Warning:missing_file:nonexistentpkg Can't find binding for package nonexistentpkg
	at main.tex; line 3 col 6 - line 3 col 6
	Anticipate undefined macros or environments
Error:undefined:\foo The token T_CS[\foo] is not defined.
	at main.tex; line 5 col 29 - line 5 col 29
	Defining it now as <ltx:ERROR/>
	In Core::Gullet[@0x564dcb512b60] /tmp/cortex_task1/latexml2/src/sub/main.tex; from line 5 col 30
Math parsing succeeded:
   ltx:XMArg: 2/2
	a tab-led line after something that is no message
Symbols assumed as simple identifiers (with # of occurences):
Status:conversion:0
Info:note:something An informational message
Conversion complete: 1 warning; 1 error; 1 undefined macro[\foo] (See latexml.log)
processing finished Fri Dec  4 13:52:47 2026
Status:conversion:2
`

func TestMapLog(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	sum, err := MapLog(strings.NewReader(latexmlLog), &out, "/tmp/cortex_task1/latexml2/src")
	require.NoError(t, err)
	require.Equal(t, LogSummary{Status: LevelError, Worst: LevelError, Messages: 3}, sum)
	require.Equal(t, `(Loading /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml...
(Loading /usr/share/perl5/LaTeXML/Package/eTeX.pool.ltxml... 0.00 sec)
(Loading /usr/share/perl5/LaTeXML/Package/article.cls.ltxml... 0.02 sec)
Warning:missing_file:nonexistentpkg Can't find binding for package nonexistentpkg
	at main.tex; line 3 col 6 - line 3 col 6
	Anticipate undefined macros or environments
Error:undefined:\foo The token T_CS[\foo] is not defined.
	at main.tex; line 5 col 29 - line 5 col 29
	Defining it now as <ltx:ERROR/>
	In Core::Gullet[@0x564dcb512b60] sub/main.tex; from line 5 col 30
Info:note:something An informational message
`, out.String())

	// What the dispatcher makes of it, with the worker's status line: the messages as LaTeXML
	// named them, details with their location.
	rep := parseLog(append(out.Bytes(), "Status:conversion:2\n"...))
	require.Equal(t, queue.StatusError, rep.Status)
	var got []string
	for _, m := range rep.Messages {
		got = append(got, fmt.Sprintf("%s:%s:%s", m.Severity, m.Category, m.What))
	}
	require.Equal(t, []string{"info:loaded_file:TeX.pool.ltxml", "info:loaded_file:eTeX.pool.ltxml", "info:loaded_file:article.cls.ltxml",
		"warning:missing_file:nonexistentpkg", `error:undefined:\foo`, "info:note:something"}, got)
	require.Equal(t, "Can't find binding for package nonexistentpkg\n\tat main.tex; line 3 col 6 - line 3 col 6\n\tAnticipate undefined macros or environments",
		rep.Messages[3].Details)
}

func TestMapLogLevels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		log   string
		level int
		sum   LogSummary
	}{
		{"", LevelOK, LogSummary{Status: LevelNone, Worst: LevelNone}},
		{"Info:a:b c\n", LevelOK, LogSummary{Status: LevelNone, Worst: LevelOK, Messages: 1}},
		{"Warning:a:b\nError:c:d e\n", LevelError, LogSummary{Status: LevelNone, Worst: LevelError, Messages: 2}},
		{"Fatal:too_many_errors:100 Too many errors (> 100)!\n", LevelFatal, LogSummary{Status: LevelNone, Worst: LevelFatal, Messages: 1}},
		{"Fatal:invalid:encoding bad\n", LevelInvalid, LogSummary{Status: LevelNone, Worst: LevelInvalid, Messages: 1}},
		{"Error:a:b\nStatus:conversion:1\n", LevelWarning, LogSummary{Status: LevelWarning, Worst: LevelError, Messages: 1}},
		{"status:conversion:x\n", LevelFatal, LogSummary{Status: LevelFatal, Worst: LevelNone}},
		{"Info:conversion:0\r\n", LevelOK, LogSummary{Status: LevelOK, Worst: LevelNone}},
		{"Debug:a:b\nwarning : x:y\nError::x\nError:a: x\nhttp://example.org:80/x\n", LevelOK, LogSummary{Status: LevelNone, Worst: LevelNone}},
	} {
		var out bytes.Buffer
		sum, err := MapLog(strings.NewReader(tc.log), &out, "")
		require.NoError(t, err)
		require.Equal(t, tc.sum, sum, "%q", tc.log)
		require.Equal(t, tc.level, sum.Level(), "%q", tc.log)
	}
}

func TestMapLogIsBounded(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	log.WriteString("Warning:long:line " + strings.Repeat("x", 100_000) + "\n")
	for range 100 {
		log.WriteString("\tdetail\n")
	}
	for log.Len() < maxMappedBytes+(1<<20) {
		log.WriteString("Warning:many:w a warning that repeats\n")
	}
	log.WriteString("Status:conversion:1\n")
	var out bytes.Buffer
	sum, err := MapLog(strings.NewReader(log.String()), &out, "")
	require.NoError(t, err)
	require.True(t, sum.Cut)
	require.LessOrEqual(t, out.Len(), maxMappedBytes)
	first, _, _ := strings.Cut(out.String(), "\n")
	require.Len(t, first, maxLineBytes, "a long line is cut")
	require.Equal(t, maxContinuations, strings.Count(out.String(), "\tdetail\n"))
	require.Equal(t, LevelWarning, sum.Level(), "the status line past the cut is not read; the worst message stands in")
}

// convert runs Convert on a source archive and returns the result's cortex.log and members.
func convert(t *testing.T, c *Converter, src string) (string, map[string][]byte, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "result.zip")
	if err := c.Convert(context.Background(), src, out); err != nil {
		return "", nil, err
	}
	log, members := readResult(t, out)
	return log, members, nil
}

// readResult returns the result archive's cortex.log and members.
func readResult(t *testing.T, out string) (string, map[string][]byte) {
	t.Helper()
	zr, err := zip.OpenReader(out)
	require.NoError(t, err)
	defer func() { _ = zr.Close() }() // only read
	members := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(t, err)
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		members[f.Name] = b
	}
	require.Equal(t, "cortex.log", zr.File[len(zr.File)-1].Name, "cortex.log comes last, after what its stage line times")
	require.Contains(t, string(members["cortex.log"]), "\nInfo:cortexq:stage_ms unpack=", "the stage line")
	return string(members["cortex.log"]), members
}

func messageKeys(rep queue.Report) []string {
	var keys []string
	for _, m := range rep.Messages {
		keys = append(keys, fmt.Sprintf("%s:%s:%s", m.Severity, m.Category, m.What))
	}
	return keys
}

// Every sample converts to the status it is documented to have, with its telltale message, and
// a result holding the HTML when LaTeXML ran.
func TestConvertSamples(t *testing.T) {
	t.Parallel()
	needLatexmlc(t)
	// Sandboxed, as cortexq worker latexml runs them by default, with test-sized limits.
	c := New(Config{Logger: discard(), Sandbox: newSandbox(t, sandbox.Limits{MemoryBytes: 2 << 30, CPU: time.Minute, ScratchBytes: 256 << 20})})
	for _, s := range Samples {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			data, err := s.Zip()
			require.NoError(t, err)
			src := filepath.Join(t.TempDir(), s.Name+".zip")
			require.NoError(t, os.WriteFile(src, data, 0o644))
			log, members := convertIn(t, c, src)
			rep := parseLog([]byte(log))
			require.Equal(t, s.Want, rep.Status, log)
			require.Contains(t, messageKeys(rep), s.WantMessage, log)
			if s.Want == queue.StatusInvalid {
				require.Len(t, members, 1, "an invalid source gets cortex.log only")
				return
			}
			require.Contains(t, members, "latexml.log")
			html := ""
			for name, b := range members {
				if strings.HasSuffix(name, ".html") {
					html = string(b)
				}
			}
			require.Contains(t, html, "<html", "the result holds the HTML")
			switch s.Name {
			case "bibliography":
				require.Contains(t, html, "ltx_bibitem", "the bibliography is converted")
				require.Contains(t, html, "Knuth")
			case "sections_math":
				require.Contains(t, html, "<math", "math is MathML")
				require.Contains(t, html, "Introduction", "the \\input section is in")
			}
		})
	}
}

// A latexmlc that runs past the timeout is killed, with what it started, and the task is
// Fatal timeout:wallclock; one that dies by a signal, or fails without a verdict, is a crash:
// Convert fails so that the worker sends an empty result.
func TestConvertTimeoutAndCrash(t *testing.T) {
	t.Parallel()
	src := makeZip(t, [2]string{"main.tex", "\\documentclass{article}"})
	script := func(body string) string {
		p := filepath.Join(t.TempDir(), "latexmlc")
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
		return p
	}

	t.Run("TimeoutIsFatalWallclock", func(t *testing.T) {
		t.Parallel()
		pidFile := filepath.Join(t.TempDir(), "pid")
		// The child sleeps in the background: killing only latexmlc would leave it running.
		prog := script(`for a; do case "$a" in --log=*) log="${a#--log=}";; esac; done
echo 'Warning:slow:thing first' > "$log"
sleep 60 & echo $! > ` + pidFile + `
wait`)
		c := New(Config{Latexmlc: prog, Timeout: 500 * time.Millisecond, Logger: discard()})
		log, _, err := convert(t, c, src)
		require.NoError(t, err)
		rep := parseLog([]byte(log))
		require.Equal(t, queue.StatusFatal, rep.Status, log)
		require.Contains(t, messageKeys(rep), "fatal:timeout:wallclock")
		require.Contains(t, messageKeys(rep), "warning:slow:thing", "what it logged before is kept")
		pid, err := os.ReadFile(pidFile)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			return exec.Command("kill", "-0", strings.TrimSpace(string(pid))).Run() != nil
		}, 10*time.Second, 50*time.Millisecond, "the process group is killed")
	})
	t.Run("SignalIsACrash", func(t *testing.T) {
		t.Parallel()
		c := New(Config{Latexmlc: script(`echo dying >&2; kill -SEGV $$`), Logger: discard()})
		_, _, err := convert(t, c, src)
		require.ErrorIs(t, err, ErrCrashed)
	})
	t.Run("FailureWithoutVerdictIsACrash", func(t *testing.T) {
		t.Parallel()
		c := New(Config{Latexmlc: script(`echo "Can't locate LaTeXML.pm" >&2; exit 2`), Logger: discard()})
		_, _, err := convert(t, c, src)
		require.ErrorIs(t, err, ErrCrashed)
		require.Contains(t, err.Error(), "Can't locate LaTeXML.pm")
	})
	t.Run("FailureWithAFatalIsAVerdict", func(t *testing.T) {
		t.Parallel()
		c := New(Config{Latexmlc: script(`for a; do case "$a" in --log=*) log="${a#--log=}";; esac; done
echo 'Fatal:perl:die Perl died' > "$log"; exit 1`), Logger: discard()})
		log, _, err := convert(t, c, src)
		require.NoError(t, err)
		require.Equal(t, queue.StatusFatal, parseLog([]byte(log)).Status, log)
	})
	t.Run("MissingProgramIsACrash", func(t *testing.T) {
		t.Parallel()
		c := New(Config{Latexmlc: filepath.Join(t.TempDir(), "nope"), Logger: discard()})
		_, _, err := convert(t, c, src)
		require.True(t, errors.Is(err, ErrCrashed))
	})
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// parseLog is what the dispatcher makes of a cortex.log.
func parseLog(log []byte) queue.Report {
	rep, err := cortexlog.Parse(bytes.NewReader(log), cortexlog.Options{})
	if err != nil {
		panic(err) // a bytes.Reader does not fail
	}
	return rep
}
