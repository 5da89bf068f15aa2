package main

// The corpus lifecycle (docs/operations.md#corpus-lifecycle): corpus add and delete, service
// delete, activate, extend and deactivate. Deletions preview without --yes, as every
// consequential mutation (preview.go).

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/jobops"
)

// filesFlag lets a deletion remove the deleted tasks' result archives.
func filesFlag(envSuffix string) cli.Flag {
	return &cli.BoolFlag{Name: "files", Usage: "also remove the result archives of the deleted tasks (<service>.zip beside each source; sources stay)",
		EnvVars: envVars(envSuffix)}
}

func batchFlag(envSuffix string) cli.Flag {
	return &cli.IntFlag{Name: "batch", Usage: "tasks or entries per transaction", Value: catalog.LifecycleBatchDefault, EnvVars: envVars(envSuffix)}
}

// batchArg checks --batch: positive, and not given with --detach (a job works the default batch).
func batchArg(c *cli.Context) error {
	switch {
	case c.Int("batch") <= 0:
		return usagef(c, "--batch: want a positive number")
	case c.Bool("detach") && c.IsSet("batch"):
		return usagef(c, "--batch does not go with --detach: a job works batches of %d", catalog.LifecycleBatchDefault)
	}
	return nil
}

func progressFlag(envSuffix string) cli.Flag {
	return &cli.DurationFlag{Name: "progress-every", Usage: "when stderr is not a terminal, print a progress line this often (0: none)",
		Value: 5 * time.Second, EnvVars: envVars(envSuffix)}
}

const deletionText = "It works a batch of --batch tasks a transaction (no long transaction; run it again after an\n" +
	"interruption to finish). Open runs are closed with the tallies they end with, and runs are kept\n" +
	"with their tallies (by name once their corpus or service is gone: cortexq runs lists them).\n" +
	"Files are left alone unless --files. Without --yes it changes nothing: it prints the rows it would\n" +
	"remove, per table. With --yes --detach it enqueues the deletion as a background job instead of\n" +
	"working it here (cortexq jobs). Every call appends a row to the audit log (cortexq audit)."

func corpusAddCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "register a corpus at PATH and import its source archives for --service",
		ArgsUsage: "NAME PATH",
		Description: "cortexq import --corpus NAME --service SERVICE PATH: walks PATH for source archives and adds a\n" +
			"task of --service for each (see cortexq import --help). Add more services with cortexq activate,\n" +
			"new files with cortexq extend.",
		Flags: []cli.Flag{serviceFlag("service the tasks are for (see cortexq service add)"), progressFlag("CORPUS_ADD_PROGRESS_EVERY"),
			detachFlag()},
		Action: runCorpusAdd,
	}
}

func runCorpusAdd(c *cli.Context) error {
	args, err := positional(c)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return usagef(c, "want NAME and PATH")
	}
	if err := required(c, flagService); err != nil {
		return err
	}
	if err := catalog.CheckCorpusName(args[0]); err != nil {
		return usagef(c, "corpus name: %v", err)
	}
	noteOf(c).Target = "corpus " + args[0] + ", service " + c.String(flagService)
	if c.Bool("detach") {
		return detachImport(c, args[0], args[1:2], "")
	}
	return importPaths(c, args[0], args[1:2], "")
}

func corpusDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a corpus: its tasks, their messages and every row keyed by it (its runs' tallies stay)",
		ArgsUsage: "NAME",
		Description: "Deletes corpus NAME and every row keyed by it or its tasks, in every table. A corpus with\n" +
			"sandboxes is refused: delete them first (cortexq sandbox delete).\n" + deletionText,
		Flags: []cli.Flag{filesFlag("CORPUS_DELETE_FILES"), batchFlag("CORPUS_DELETE_BATCH"), progressFlag("CORPUS_DELETE_PROGRESS_EVERY"), yesFlag("CORPUS_DELETE_YES"),
			detachFlag()},
		Action: runCorpusDelete,
	}
}

func runCorpusDelete(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	job := jobops.LifecycleArgs{Corpus: name, Files: c.Bool("files")}
	return deletion(c, "corpus "+name, jobops.KindDeleteCorpus, job, func(root lifecycleRoot) (catalog.Removal, error) {
		return root.PreviewDeleteCorpus(c.Context, name)
	}, func(root lifecycleRoot, o catalog.DeleteOptions) (catalog.Removal, error) {
		return root.DeleteCorpus(c.Context, name, o)
	})
}

func serviceDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:        "delete",
		Usage:       "delete a service: its tasks in every corpus, their messages and every row keyed by it (its runs' tallies stay)",
		ArgsUsage:   "NAME",
		Description: "Deletes service NAME, its workers' rows, its tasks in every corpus and every row keyed by them.\n" + deletionText,
		Flags: []cli.Flag{filesFlag("SERVICE_DELETE_FILES"), batchFlag("SERVICE_DELETE_BATCH"), progressFlag("SERVICE_DELETE_PROGRESS_EVERY"), yesFlag("SERVICE_DELETE_YES"),
			detachFlag()},
		Action: runServiceDelete,
	}
}

func runServiceDelete(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	job := jobops.LifecycleArgs{Service: name, Files: c.Bool("files")}
	return deletion(c, "service "+name, jobops.KindDeleteService, job, func(root lifecycleRoot) (catalog.Removal, error) {
		return root.PreviewDeleteService(c.Context, name)
	}, func(root lifecycleRoot, o catalog.DeleteOptions) (catalog.Removal, error) {
		return root.DeleteService(c.Context, name, o)
	})
}

func deactivateCommand() *cli.Command {
	return &cli.Command{
		Name:  "deactivate",
		Usage: "remove a service from a corpus: its tasks and their messages go, the runs' tallies stay",
		Description: "Deletes the tasks of --service in --corpus and every row keyed by them or by the pair (report\n" +
			"rollups, diff matrices, fair share). cortexq activate adds them back, as new tasks.\n" + deletionText,
		Flags: []cli.Flag{corpusFlag("corpus to remove the service from"), serviceFlag("service to remove"),
			filesFlag("DEACTIVATE_FILES"), batchFlag("DEACTIVATE_BATCH"), progressFlag("DEACTIVATE_PROGRESS_EVERY"), yesFlag("DEACTIVATE_YES"),
			detachFlag()},
		Action: runDeactivate,
	}
}

func runDeactivate(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := required(c, flagCorpus, flagService); err != nil {
		return err
	}
	corpus, service := c.String(flagCorpus), c.String(flagService)
	job := jobops.LifecycleArgs{Corpus: corpus, Service: service, Files: c.Bool("files")}
	return deletion(c, "corpus "+corpus+", service "+service, jobops.KindDeactivate, job, func(root lifecycleRoot) (catalog.Removal, error) {
		return root.PreviewDeactivate(c.Context, corpus, service)
	}, func(root lifecycleRoot, o catalog.DeleteOptions) (catalog.Removal, error) {
		return root.Deactivate(c.Context, corpus, service, o)
	})
}

// lifecycleRoot is what the lifecycle commands act through.
type lifecycleRoot = *catalog.Catalog

// deletion previews a deletion of target and, with --yes, carries it out, printing the rows
// removed per table; with --yes --detach, it enqueues it as a job of kind with args instead.
func deletion(c *cli.Context, target, kind string, args jobops.LifecycleArgs, preview func(lifecycleRoot) (catalog.Removal, error),
	act func(lifecycleRoot, catalog.DeleteOptions) (catalog.Removal, error)) error {
	if err := batchArg(c); err != nil {
		return err
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	noteOf(c).Target = target
	pre, err := preview(root.Catalog)
	if err != nil {
		return lifecycleError(c, err)
	}
	files := ""
	if c.Bool("files") {
		files = " and their result archives"
	}
	if !confirm(c, pre.Tables["tasks"], fmt.Sprintf("%s: would remove %s rows%s (%s); %d runs kept with their tallies",
		target, commas(pre.Rows()), files, tablesText(pre), pre.RunsDetached)) {
		return nil
	}
	if c.Bool("detach") {
		return enqueueDetached(c, root, kind, args)
	}
	progress := newProgress(c.App.ErrWriter, "delete", pre.Tables["tasks"], c.Duration("progress-every"))
	defer progress.stop()
	sum, err := act(root.Catalog, catalog.DeleteOptions{Files: c.Bool("files"), BatchSize: c.Int("batch"), Progress: progress.set})
	progress.stop()
	if err != nil {
		return err
	}
	noteOf(c).matched(sum.Tables["tasks"])
	fmt.Fprintf(c.App.Writer, "%s: removed %s rows (%s); %d runs closed, %d kept by name; %d result archives removed\n",
		target, commas(sum.Rows()), tablesText(sum), sum.RunsClosed, sum.RunsDetached, sum.Files)
	return nil
}

// tablesText lists a removal's rows per table, the tables with none left out.
func tablesText(r catalog.Removal) string {
	var parts []string
	for _, t := range r.TableNames() {
		if n := r.Tables[t]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", t, commas(n)))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// lifecycleError makes an unknown name or a sandbox a usage error.
func lifecycleError(c *cli.Context, err error) error {
	if errors.Is(err, queue.ErrNotFound) || errors.Is(err, catalog.ErrSandbox) {
		return usagef(c, "%v", err)
	}
	return err
}

func activateCommand() *cli.Command {
	return &cli.Command{
		Name:  "activate",
		Usage: "add a service to a corpus: a task of --service for every entry the corpus already knows (no rescan)",
		Description: "Adds a TODO task of --service in --corpus for every entry its other services' tasks (or its\n" +
			"import from CorTeX) already know, without reading its files, and opens a run if none is open.\n" +
			"It works a batch of --batch entries a transaction, in entry order: run it again after an\n" +
			"interruption and it adds only what is missing. New files: cortexq extend. Every call appends a\n" +
			"row to the audit log (cortexq audit).",
		Flags: []cli.Flag{corpusFlag("corpus to activate the service on"), serviceFlag("service to add (see cortexq service add)"),
			batchFlag("ACTIVATE_BATCH"), progressFlag("ACTIVATE_PROGRESS_EVERY"), detachFlag()},
		Action: runActivate,
	}
}

func runActivate(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := required(c, flagCorpus, flagService); err != nil {
		return err
	}
	if err := batchArg(c); err != nil {
		return err
	}
	corpus, service := c.String(flagCorpus), c.String(flagService)
	noteOf(c).Target = "corpus " + corpus + ", service " + service
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	if c.Bool("detach") {
		return enqueueDetached(c, root, jobops.KindActivate, jobops.LifecycleArgs{Corpus: corpus, Service: service})
	}
	progress := newProgress(c.App.ErrWriter, "activate", -1, c.Duration("progress-every"))
	defer progress.stop()
	began := time.Now()
	sum, err := root.Catalog.Activate(c.Context, corpus, service, c.Int("batch"), progress.set)
	progress.stop()
	if err != nil {
		return lifecycleError(c, err)
	}
	noteOf(c).matched(sum.Added)
	run := ""
	if sum.RunOpened {
		run = "; opened a run"
	}
	fmt.Fprintf(c.App.Writer, "corpus %s, service %s: %d tasks added, %d entries read%s, in %s\n",
		corpus, service, sum.Added, sum.Entries, run, time.Since(began).Round(time.Millisecond))
	return nil
}

func extendCommand() *cli.Command {
	return &cli.Command{
		Name:  "extend",
		Usage: "rescan a corpus's path and add a task of every active service for each new source archive",
		Description: "Walks the path of --corpus again (as cortexq import does) and, for every source archive found\n" +
			"that has no task yet, adds one of each service active on the corpus (each service with tasks\n" +
			"in it). It works a batch of --batch entries a transaction: an interruption keeps what was added,\n" +
			"and running it again adds the rest. Every call appends a row to the audit log (cortexq audit).",
		Flags:  []cli.Flag{corpusFlag("corpus to rescan"), batchFlag("EXTEND_BATCH"), progressFlag("EXTEND_PROGRESS_EVERY"), detachFlag()},
		Action: runExtend,
	}
}

func runExtend(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := required(c, flagCorpus); err != nil {
		return err
	}
	if err := batchArg(c); err != nil {
		return err
	}
	corpus := c.String(flagCorpus)
	noteOf(c).Target = "corpus " + corpus
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	if c.Bool("detach") {
		return enqueueDetached(c, root, jobops.KindExtend, jobops.LifecycleArgs{Corpus: corpus})
	}
	progress := newProgress(c.App.ErrWriter, "extend", -1, c.Duration("progress-every"))
	defer progress.stop()
	began := time.Now()
	sum, err := root.Catalog.Extend(c.Context, corpus, c.Int("batch"), progress.set)
	progress.stop()
	if err != nil {
		return lifecycleError(c, err)
	}
	noteOf(c).matched(sum.Added)
	fmt.Fprintf(c.App.Writer, "corpus %s: %d source archives found, %d tasks added for %s; %d skipped (not source archives), in %s\n",
		corpus, sum.Entries, sum.Added, strings.Join(sum.Services, ", "), sum.Skipped, time.Since(began).Round(time.Millisecond))
	return nil
}
