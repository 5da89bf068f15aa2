package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// The CLI reference (docs/cli.md) and the configuration tables (docs/configuration.md) are
// generated from the app itself, between marker comments; this test fails when they drift.
// CORTEXQ_UPDATE_DOCS=1 (or the older name, CORTEXQ_UPDATE_README=1) rewrites them.

const docsDir = "../../docs"

// generatedDocs maps each generated file to its sections: marker name → content.
func generatedDocs(app *cli.App) map[string]map[string]string {
	return map[string]map[string]string{
		"cli.md": {"cli-reference": renderCommands(app.Commands, []string{"cortexq"})},
		"configuration.md": {
			"config-global": flagTable(app.Flags, "global"),
			"config-serve":  flagTable(findCommand(app.Commands, "serve").Flags, "serve"),
		},
	}
}

func updateDocs() bool {
	return os.Getenv("CORTEXQ_UPDATE_DOCS") == "1" || os.Getenv("CORTEXQ_UPDATE_README") == "1"
}

func TestReadmeCLIReferenceIsTrue(t *testing.T) {
	for file, sections := range generatedDocs(newApp()) {
		path := filepath.Join(docsDir, file)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		doc := string(b)
		updated := doc
		for name, want := range sections {
			start, end := "<!-- "+name+":start -->\n", "<!-- "+name+":end -->"
			i, j := strings.Index(updated, start), strings.Index(updated, end)
			require.True(t, i >= 0 && j > i, "docs/%s has the markers of %s", file, name)
			updated = updated[:i+len(start)] + want + updated[j:]
		}
		if updateDocs() {
			if updated != doc {
				require.NoError(t, os.WriteFile(path, []byte(updated), 0o644))
			}
			continue
		}
		assert.Equal(t, updated, doc, "docs/%s differs from the app: run CORTEXQ_UPDATE_DOCS=1 go test -run TestReadmeCLIReferenceIsTrue ./cmd/cortexq", file)
	}
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// renderCommands writes a heading, the usage and the flag table of each leaf command.
func renderCommands(cmds []*cli.Command, path []string) string {
	var sb strings.Builder
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		p := append(append([]string(nil), path...), c.Name)
		if len(c.Subcommands) > 0 {
			sb.WriteString(renderCommands(c.Subcommands, p))
			continue
		}
		head := strings.Join(p, " ")
		if c.ArgsUsage != "" {
			args := c.ArgsUsage
			if k := strings.Index(args, " ("); k > 0 {
				args = args[:k]
			}
			head += " " + args
		}
		fmt.Fprintf(&sb, "#### `%s`\n\n%s.\n\n", head, sentence(c.Usage))
		switch {
		case c.Name == "serve":
			sb.WriteString("Flags: see [Configuration](configuration.md#cortexq-serve).\n\n")
		case len(visibleFlags(c.Flags)) > 0:
			sb.WriteString(flagTable(c.Flags, ""))
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

func sentence(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return strings.TrimSuffix(string(r), ".")
}

func visibleFlags(flags []cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		out = append(out, f)
	}
	return out
}

// flagTable renders flags as a markdown table: flag, default, environment, meaning.
func flagTable(flags []cli.Flag, _ string) string {
	var sb strings.Builder
	sb.WriteString("| Flag | Default | Environment | Meaning |\n|---|---|---|---|\n")
	for _, f := range visibleFlags(flags) {
		doc := f.(cli.DocGenerationFlag)
		name := "--" + f.Names()[0]
		if doc.TakesValue() {
			name += " VALUE"
		}
		def := doc.GetDefaultText()
		if def == "" {
			def = doc.GetValue()
		}
		if f.Names()[0] == "replica" {
			def = "<host>-<pid>"
		}
		if def != "" {
			def = "`" + def + "`"
		}
		var envs []string
		for _, e := range doc.GetEnvVars() {
			envs = append(envs, "`"+e+"`")
		}
		usage := strings.ReplaceAll(doc.GetUsage(), "|", `\|`)
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s |\n", name, def, strings.Join(envs, ", "), usage)
	}
	return sb.String()
}
