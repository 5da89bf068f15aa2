package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/scanner"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestDockerBuildContext checks, without Docker, that every image docker-compose.yml builds gets
// what its Dockerfile needs through .dockerignore (docs/operations-compose.md, "Ignore
// file"): the sources of its COPY lines, and every file of every package of this module that
// its `go build` lines compile (go list -deps), embedded files included. A package the context
// leaves out breaks the image build only, which nothing else runs.
func TestDockerBuildContext(t *testing.T) {
	root := filepath.Join("..", "..")
	builds := composeBuilds(t, filepath.Join(root, "docker-compose.yml"))
	require.NotEmpty(t, builds, "docker-compose.yml builds no image")
	for _, b := range builds {
		t.Run(b.String(), func(t *testing.T) {
			ctxDir := filepath.Join(root, filepath.FromSlash(b.Context))
			ignore := readDockerignore(t, ctxDir)
			df, err := os.ReadFile(filepath.Join(ctxDir, filepath.FromSlash(b.Dockerfile)))
			require.NoError(t, err)
			copies, pkgs := dockerfileNeeds(t, string(df), b.Target)
			checked := 0
			for _, src := range copies {
				checked += checkCopySource(t, ctxDir, ignore, src)
			}
			for _, pkg := range pkgs {
				files := moduleFiles(t, ctxDir, pkg)
				require.NotEmpty(t, files, "go list -deps %s found no file of this module", pkg)
				for _, f := range files {
					if !ignore.admits(f) {
						t.Errorf(".dockerignore leaves out %s, which `go build %s` compiles", f, pkg)
					}
				}
				checked += len(files)
			}
			require.NotZero(t, checked, "nothing to check: the Dockerfile copies nothing from the context")
			t.Logf("%d files checked (%d COPY sources, go build %v)", checked, len(copies), pkgs)
		})
	}
}

// TestDockerignoreMatching pins the matcher to Docker's rules (the moby patternmatcher): the last
// matching line wins, a pattern matching a parent directory matches what is inside it, `*` stops
// at a slash and `**` does not, `!` lets a path back in, patterns are cleaned.
func TestDockerignoreMatching(t *testing.T) {
	m := parseDockerignore(strings.NewReader(
		"# comment\n*\n!go.mod\n!cmd/\n!/queue\n**/*_test.go\n**/testdata/\n!cmd/keep_test.go\n  \ndocs/*.md\n!docs/a?.md\n"))
	for f, want := range map[string]bool{
		"go.mod":                      true,
		"go.sum":                      false,
		"cmd/cortexq/main.go":         true,
		"cmd/cortexq/main_test.go":    false,
		"cmd/keep_test.go":            true,
		"queue/lease/lease.go":        true,
		"queue/lease/testdata/x.json": false,
		"internal/bench/bench.go":     false,
		"docs/ab.md":                  true,
		"docs/abc.md":                 false,
		"docs/sub/ab.md":              false,
		"README.md":                   false,
	} {
		require.Equal(t, want, m.admits(f), "%s", f)
	}
	require.True(t, parseDockerignore(strings.NewReader("")).admits("anything/at/all"))
}

// composeBuild is one image build of docker-compose.yml.
type composeBuild struct {
	Service, Context, Dockerfile, Target string
}

func (b composeBuild) String() string {
	if b.Target == "" {
		return b.Service + ":" + b.Dockerfile
	}
	return b.Service + ":" + b.Dockerfile + ":" + b.Target
}

func composeBuilds(t *testing.T, file string) []composeBuild {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var doc struct {
		Services map[string]struct {
			Build yaml.Node `yaml:"build"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	var builds []composeBuild
	for name, svc := range doc.Services {
		b := composeBuild{Service: name, Context: ".", Dockerfile: "Dockerfile"}
		switch svc.Build.Kind {
		case 0:
			continue
		case yaml.ScalarNode:
			b.Context = svc.Build.Value
		default:
			var m struct{ Context, Dockerfile, Target string }
			require.NoError(t, svc.Build.Decode(&m), "service %s: build", name)
			b.Context = cmpOr(m.Context, b.Context)
			b.Dockerfile = cmpOr(m.Dockerfile, b.Dockerfile)
			b.Target = m.Target
		}
		builds = append(builds, b)
	}
	return builds
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// dockerfileNeeds returns what the stages the target is built from take from the context: the
// sources of their COPY and ADD lines, and the packages their RUN lines `go build`.
func dockerfileNeeds(t *testing.T, dockerfile, target string) (copies, pkgs []string) {
	t.Helper()
	type stage struct {
		base  string
		froms []string // stages it copies from
		lines []string
	}
	var stages []*stage
	byName := map[string]int{}
	for _, line := range dockerfileLines(dockerfile) {
		word, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			f := strings.Fields(rest)
			stages = append(stages, &stage{base: f[0]})
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				byName[strings.ToLower(f[2])] = len(stages) - 1
			}
		case "COPY", "ADD", "RUN":
			require.NotEmpty(t, stages, "%q before FROM", line)
			s := stages[len(stages)-1]
			s.lines = append(s.lines, line)
			for _, f := range strings.Fields(rest) {
				if from, ok := strings.CutPrefix(f, "--from="); ok {
					s.froms = append(s.froms, strings.ToLower(from))
				}
			}
		}
	}
	require.NotEmpty(t, stages, "no FROM")
	want := len(stages) - 1
	if target != "" {
		i, ok := byName[strings.ToLower(target)]
		require.True(t, ok, "no stage %q", target)
		want = i
	}
	needed := map[int]bool{}
	var visit func(i int)
	visit = func(i int) {
		if needed[i] {
			return
		}
		needed[i] = true
		for _, dep := range append([]string{strings.ToLower(stages[i].base)}, stages[i].froms...) {
			if j, ok := byName[dep]; ok {
				visit(j)
			}
		}
	}
	visit(want)
	goBuild := regexp.MustCompile(`\bgo build\b(.*)`)
	for i, s := range stages {
		if !needed[i] {
			continue
		}
		for _, line := range s.lines {
			word, rest, _ := strings.Cut(line, " ")
			if strings.EqualFold(word, "RUN") {
				if m := goBuild.FindStringSubmatch(rest); m != nil {
					for _, arg := range strings.Fields(m[1]) {
						if strings.HasPrefix(arg, "./") {
							pkgs = append(pkgs, strings.TrimRight(arg, ";&|"))
						}
					}
				}
				continue
			}
			copies = append(copies, copySources(t, rest)...)
		}
	}
	return copies, pkgs
}

// dockerfileLines joins continued lines and drops comments and blank lines.
func dockerfileLines(dockerfile string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(dockerfile, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, strings.Join(strings.Fields(cur.String()), " "))
		cur.Reset()
	}
	return out
}

// copySources returns the context paths a COPY or ADD takes (none with --from).
func copySources(t *testing.T, args string) []string {
	t.Helper()
	var words []string
	for _, f := range strings.Fields(args) {
		if strings.HasPrefix(f, "--from=") {
			return nil
		}
		if !strings.HasPrefix(f, "--") || len(words) > 0 {
			words = append(words, f)
		}
	}
	if rest := strings.Join(words, " "); strings.HasPrefix(rest, "[") {
		words = nil
		require.NoError(t, json.Unmarshal([]byte(rest), &words), "COPY %s", args)
	}
	require.GreaterOrEqual(t, len(words), 2, "COPY %s", args)
	return words[:len(words)-1]
}

// checkCopySource fails the test if a COPY source is not in the context, or a directory (the
// whole context, for .) has no file in it; it returns how many files it found admitted.
func checkCopySource(t *testing.T, ctxDir string, ignore dockerignore, src string) int {
	t.Helper()
	src = path.Clean(strings.TrimPrefix(src, "/"))
	matches, err := filepath.Glob(filepath.Join(ctxDir, filepath.FromSlash(src)))
	require.NoError(t, err)
	if len(matches) == 0 {
		t.Errorf("COPY %s: no such file in the context", src)
	}
	n := 0
	for _, m := range matches {
		admitted := 0
		err := filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(ctxDir, p)
			if err == nil && ignore.admits(filepath.ToSlash(rel)) {
				admitted++
			}
			return err
		})
		require.NoError(t, err)
		if admitted == 0 {
			t.Errorf(".dockerignore leaves out %s, which the Dockerfile copies", m)
		}
		n += admitted
	}
	return n
}

// moduleFiles lists, relative to dir (the module root), the files go build compiles or embeds
// from this module's packages for pkg and everything it imports.
func moduleFiles(t *testing.T, dir, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json", pkg)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps %s: %s", pkg, stderr.String())
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	var files []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir    string
			Module *struct{ Main bool }
			GoFiles, CgoFiles, CFiles, CXXFiles, HFiles, SFiles, SysoFiles,
			EmbedFiles []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(abs, p.Dir)
		require.NoError(t, err)
		for _, list := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.HFiles, p.SFiles, p.SysoFiles, p.EmbedFiles} {
			for _, f := range list {
				files = append(files, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			files = append(files, f)
		}
	}
	return files
}

// dockerignore is a parsed .dockerignore, matched as Docker matches it (the moby
// patternmatcher that the legacy builder, BuildKit and compose all use).
type dockerignore []ignorePattern

type ignorePattern struct {
	exclusion bool // a "!" line: lets matching paths back in
	re        *regexp.Regexp
}

func readDockerignore(t *testing.T, dir string) dockerignore {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	return parseDockerignore(f)
}

func parseDockerignore(r io.Reader) dockerignore {
	var out dockerignore
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "\uFEFF"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := ignorePattern{}
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			p.exclusion, line = true, strings.TrimSpace(rest)
		}
		if line != "" {
			line = path.Clean(line)
			if len(line) > 1 && line[0] == '/' {
				line = line[1:]
			}
		}
		p.re = regexp.MustCompile(ignoreRegexp(line))
		out = append(out, p)
	}
	return out
}

// ignoreRegexp translates a pattern: `**` any number of path elements (a following slash
// included), `*` anything but a slash, `?` one character but a slash, `\` escapes.
func ignoreRegexp(pattern string) string {
	var re strings.Builder
	re.WriteString("^")
	var sc scanner.Scanner
	sc.Init(strings.NewReader(pattern))
	for sc.Peek() != scanner.EOF {
		ch := sc.Next()
		switch {
		case ch == '*' && sc.Peek() == '*':
			sc.Next()
			if sc.Peek() == '/' {
				sc.Next()
			}
			if sc.Peek() == scanner.EOF {
				re.WriteString(".*")
			} else {
				re.WriteString("(.*/)?")
			}
		case ch == '*':
			re.WriteString("[^/]*")
		case ch == '?':
			re.WriteString("[^/]")
		case strings.ContainsRune(".+()|{}$", ch):
			re.WriteString(`\` + string(ch))
		case ch == '\\':
			if sc.Peek() != scanner.EOF {
				re.WriteString(`\` + string(sc.Next()))
			} else {
				re.WriteString(`\\`)
			}
		default:
			re.WriteRune(ch)
		}
	}
	re.WriteString("$")
	return re.String()
}

// admits reports whether file (slash-separated, relative to the context) is sent to the
// builder: the last pattern matching it or one of its parent directories decides.
func (d dockerignore) admits(file string) bool {
	excluded := false
	parent := path.Dir(file)
	dirs := strings.Split(parent, "/")
	for _, p := range d {
		if p.exclusion != excluded {
			continue // an exclusion cannot change a path not excluded, nor a pattern an excluded one
		}
		match := p.re.MatchString(file)
		for i := 0; !match && parent != "." && i < len(dirs); i++ {
			match = p.re.MatchString(strings.Join(dirs[:i+1], "/"))
		}
		if match {
			excluded = !p.exclusion
		}
	}
	return !excluded
}
