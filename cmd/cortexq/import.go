package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
)

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "add a task for each source archive under PATHs (idempotent)",
		ArgsUsage: "PATH...",
		Description: "Walks each PATH recursively (a PATH may also be a single archive) and adds one task of --service\n" +
			"for every *.zip file that is not itself a result archive. Result archives are the ones workers'\n" +
			"results are published as, beside their source: <service>.zip and <service>.sandbox-<id>.zip, for\n" +
			"any service in the database; they are skipped. A task's entry is the archive's absolute path.\n" +
			"\n" +
			"--from-list FILE reads entries from a newline-separated list of paths instead of walking (for huge\n" +
			"corpora; relative paths are taken from the current directory; the same *.zip and result archive\n" +
			"rule applies; files are not checked).\n" +
			"\n" +
			"The corpus is created if missing. Its path is the deepest directory holding every PATH (with\n" +
			"--from-list, every entry); every entry must lie beneath the path of the corpus, and a symbolic\n" +
			"link among the walked archives must lead to a file beneath it (relative links only): otherwise the\n" +
			"import is refused and nothing is added. Replicas read sources and write results beneath that path\n" +
			"only. An entry that already has a task of the corpus and service is left alone, so importing again\n" +
			"only adds what is new. A run of the corpus and service is opened if none is.",
		Flags: []cli.Flag{
			corpusFlag("corpus to import into (created if missing)"),
			serviceFlag("service the tasks are for (see cortexq service add)"),
			&cli.StringFlag{
				Name:    "from-list",
				Usage:   "read entries from `FILE`, one path a line, instead of walking PATHs",
				EnvVars: envVars("IMPORT_FROM_LIST"),
			},
		},
		Action: runImport,
	}
}

func runImport(c *cli.Context) error {
	paths, err := positional(c)
	if err != nil {
		return err
	}
	if err := required(c, flagCorpus, flagService); err != nil {
		return err
	}
	list := c.String("from-list")
	switch {
	case len(paths) == 0 && list == "":
		return usagef(c, "want at least one PATH, or --from-list")
	case len(paths) > 0 && list != "":
		return usagef(c, "give PATHs to walk or --from-list, not both")
	}
	if err := checkCorpusName(c.String(flagCorpus)); err != nil {
		return usagef(c, "--corpus: %v", err)
	}
	// Bad paths fail before anything touches the database.
	roots := make([]string, len(paths))
	for i, p := range paths {
		abs, err := filepath.Abs(p)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return fmt.Errorf("import: %s: %w", p, pathErr(err))
		}
		roots[i] = abs
	}
	var listFile *os.File
	if list != "" {
		f, err := os.Open(list)
		if err != nil {
			return fmt.Errorf("import: --from-list %s: %w", list, pathErr(err))
		}
		defer f.Close()
		listFile = f
	}

	store, done, err := openStore(c, lease.Config{})
	if err != nil {
		return err
	}
	defer done()
	services, err := catalogOf(store).Services(c.Context)
	if err != nil {
		return err
	}
	var serviceID int32
	names := make(map[string]bool, len(services))
	for _, s := range services {
		names[s.Name] = true
		if s.Name == c.String(flagService) {
			serviceID = s.ID
		}
	}
	if serviceID == 0 {
		return fmt.Errorf("import: unknown service %s (add it with: cortexq service add %s)", c.String(flagService), c.String(flagService))
	}
	isSource := func(path string) bool { return archive.IsSource(filepath.Base(path), names) }

	began := time.Now()
	var entries []string
	links := map[string]bool{} // walked entries that are symbolic links
	skipped := 0
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !isFile(path, d) {
				return nil
			}
			if isSource(path) {
				entries = append(entries, path)
				if d.Type()&fs.ModeSymlink != 0 {
					links[path] = true
				}
			} else if strings.HasSuffix(path, ".zip") {
				skipped++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
	}
	if listFile != nil {
		cwd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		sc := bufio.NewScanner(listFile)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			if !filepath.IsAbs(line) {
				line = filepath.Join(cwd, line)
			}
			line = filepath.Clean(line)
			if isSource(line) {
				entries = append(entries, line)
			} else {
				skipped++
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("import: read %s: %w", list, err)
		}
	}
	slog.Debug("entries found", "entries", len(entries), "skipped", skipped, "elapsed", time.Since(began))
	if len(entries) == 0 {
		// Most likely a wrong path: creating the corpus would take its name for nothing.
		what := strings.Join(paths, ", ")
		if list != "" {
			what = list
		}
		return fmt.Errorf("import: no source archives in %s (%d files skipped: not source archives); nothing imported", what, skipped)
	}

	// A new corpus's path: the deepest directory holding the PATHs, or the listed entries.
	var dirs []string
	if len(roots) > 0 {
		for _, r := range roots {
			if fi, err := os.Stat(r); err == nil && !fi.IsDir() {
				r = filepath.Dir(r)
			}
			dirs = append(dirs, r)
		}
	} else {
		for _, e := range entries {
			dirs = append(dirs, filepath.Dir(e))
		}
	}
	sum, err := catalogOf(store).Import(c.Context, catalog.ImportRequest{
		Corpus: c.String(flagCorpus), CorpusPath: commonDir(dirs), ServiceID: serviceID, Entries: entries,
		CheckFunc: func(corpusPath string) error { return checkBeneath(c.String(flagCorpus), corpusPath, entries, links) },
	})
	if err != nil {
		return err
	}
	created := ""
	if sum.CorpusCreated {
		created = " (created)"
	}
	run := ""
	if sum.RunOpened {
		run = "; opened a run"
	}
	fmt.Fprintf(c.App.Writer, "corpus %s%s, service %s: %d tasks added, %d already present, %d skipped (not source archives)%s, in %s\n",
		c.String(flagCorpus), created, c.String(flagService), sum.Added, sum.Existing, skipped, run,
		time.Since(began).Round(time.Millisecond))
	return nil
}

// commonDir is the deepest directory holding every one of dirs (absolute and clean).
func commonDir(dirs []string) string {
	common := dirs[0]
	for _, d := range dirs[1:] {
		for !isBeneath(common, d) && d != common {
			common = filepath.Dir(common)
		}
	}
	return common
}

// isBeneath reports whether the clean absolute path lies beneath the directory dir.
func isBeneath(dir, path string) bool {
	return dir == "/" && path != "/" || strings.HasPrefix(path, dir+"/")
}

// checkBeneath refuses entries that do not lie beneath the corpus's path, and symbolic links
// among them that lead out of it: they are opened as the replicas open them (os.Root at the
// corpus path), which follows a link only while it stays beneath.
func checkBeneath(corpus, corpusPath string, entries []string, links map[string]bool) error {
	if filepath.IsAbs(corpusPath) {
		corpusPath = filepath.Clean(corpusPath)
	}
	for _, e := range entries {
		if !filepath.IsAbs(corpusPath) || !isBeneath(corpusPath, e) {
			return fmt.Errorf("%s is not beneath the path %q of corpus %s: nothing imported "+
				"(import it into a corpus of its own)", e, corpusPath, corpus)
		}
	}
	if len(links) == 0 {
		return nil
	}
	root, err := os.OpenRoot(corpusPath)
	if err != nil {
		return fmt.Errorf("corpus path %s: %w", corpusPath, pathErr(err))
	}
	defer root.Close()
	for _, e := range entries {
		if !links[e] {
			continue
		}
		rel, err := filepath.Rel(corpusPath, e)
		if err != nil {
			return err
		}
		fi, err := root.Stat(rel)
		if err == nil && !fi.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err != nil {
			target, _ := os.Readlink(e)
			return fmt.Errorf("%s is a symbolic link to %s, which does not lead to a file beneath the "+
				"corpus path %s (%v): refused, nothing imported", e, target, corpusPath, pathErr(err))
		}
	}
	return nil
}

// checkCorpusName refuses corpus names that would garble status lines and logs: empty, over
// 200 bytes, not UTF-8, with a control character, or with blanks at either end.
func checkCorpusName(name string) error { return catalog.CheckCorpusName(name) }

// isFile reports whether a walked entry is a regular file, or a symbolic link to one.
func isFile(path string, d fs.DirEntry) bool {
	if d.Type().IsRegular() {
		return true
	}
	if d.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// pathErr drops the operation and path of an *fs.PathError: the caller names the path.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
