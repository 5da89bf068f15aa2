package main

import (
	"os/exec"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/worker/latexml"
	"github.com/cortexq/cortexq/worker/sandbox"
)

// latexmlService is the service LaTeX→HTML conversions are imported for, as in CorTeX.
const latexmlService = "tex_to_html"

// latexmlWorkerCommand is `cortexq worker latexml`: the worker flags (with --service defaulting
// to tex_to_html) and the conversion's own.
func latexmlWorkerCommand(common []cli.Flag) *cli.Command {
	for _, f := range common {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "service" {
			sf.Value = latexmlService
			sf.Usage = "the service to work"
		}
	}
	return &cli.Command{
		Name:  "latexml",
		Usage: "convert LaTeX source archives to HTML with LaTeXML (latexmlc)",
		Description: "Each task's source zip is unpacked (at most --max-unpack-bytes, no path outside its directory), its\n" +
			"main .tex picked (the one with \\documentclass; main.tex, ms.tex, paper.tex, article.tex first), and\n" +
			"latexmlc --format=html5 run on it. The result zip holds the HTML and its assets, latexml.log and a\n" +
			"cortex.log with LaTeXML's messages (severity:category:what details) and a Status:conversion line.\n" +
			"A source without a .tex is Invalid (no_tex); a conversion past --timeout is Fatal\n" +
			"(timeout:wallclock); a latexmlc that crashes gets an empty result, which the dispatcher retries.\n" +
			"Each conversion runs in a bubblewrap sandbox (--sandbox=bwrap, the default): no network, no host\n" +
			"files but the system's programs, uid 65534, the --sandbox-* limits; a limit reached is Fatal\n" +
			"(sandbox:memory_limit, ...). A worker that cannot sandbox refuses to start; --sandbox=none runs\n" +
			"conversions unconfined. The start-up line says which sandbox is in force.\n" +
			"Give the service a lease longer than --timeout:\n\n" +
			"   cortexq service add tex_to_html --lease-timeout 6m\n" +
			"   cortexq worker latexml --concurrency 4\n\n" +
			"See docs/latexml.md.",
		Flags: append(append(common,
			&cli.DurationFlag{Name: "timeout", Usage: "kill a conversion (latexmlc and what it started) after this long; the task is then Fatal timeout:wallclock", Value: latexml.TimeoutDefault, EnvVars: envVars("LATEXML_TIMEOUT")},
			&cli.StringFlag{Name: "latexmlc", Usage: "the latexmlc program", Value: latexml.LatexmlcDefault, EnvVars: envVars("LATEXML_LATEXMLC")},
			&cli.StringSliceFlag{Name: "latexmlc-arg", Usage: "an extra latexmlc argument, e.g. --latexmlc-arg=--pmml (repeat for more)", EnvVars: envVars("LATEXML_ARGS")},
			&cli.Int64Flag{Name: "max-unpack-bytes", Usage: "largest a source archive may inflate to; larger is Invalid (archive_too_large)", Value: latexml.MaxUnpackBytesDefault, EnvVars: envVars("LATEXML_MAX_UNPACK_BYTES")},
		), sandboxFlags(sandbox.Bwrap, "LATEXML", "for a machine that cannot sandbox, with papers you trust")...),
		Action: func(c *cli.Context) error {
			if c.Duration("timeout") <= 0 {
				return usagef(c, "--timeout %s: want a positive duration", c.Duration("timeout"))
			}
			if c.Int64("max-unpack-bytes") <= 0 {
				return usagef(c, "--max-unpack-bytes %d: want a positive size", c.Int64("max-unpack-bytes"))
			}
			prog, err := exec.LookPath(c.String("latexmlc"))
			if err != nil {
				return usagef(c, "latexmlc %q: %v (Debian and Ubuntu: apt-get install latexml)", c.String("latexmlc"), err)
			}
			sb, err := openSandbox(c)
			if err != nil {
				return err
			}
			return runWorker(c, latexml.New(latexml.Config{
				Latexmlc: prog, Args: c.StringSlice("latexmlc-arg"), Timeout: c.Duration("timeout"),
				Limits: latexml.Limits{MaxBytes: c.Int64("max-unpack-bytes")}, Sandbox: sb,
			}), sb)
		},
	}
}
