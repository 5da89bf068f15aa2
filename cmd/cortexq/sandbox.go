package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/reports"
)

func sandboxCommand() *cli.Command {
	return &cli.Command{
		Name:  "sandbox",
		Usage: "make, list and delete sandboxes: copies of a slice of a corpus to run again apart",
		Description: "A sandbox is a corpus whose parent is another corpus. Its tasks are copies of a slice of the\n" +
			"parent's tasks that read the same source archives; their results are published beside each source\n" +
			"as <service>.sandbox-<id>.zip, so the parent's results (<service>.zip) and its tasks, messages and\n" +
			"runs are never touched. report, runs, diff, rerun, status, pause and resume take a sandbox's name\n" +
			"as --corpus; cortexq serve serves its tasks as any others.",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "make a sandbox holding copies of a slice of a corpus's tasks, as TODO",
				ArgsUsage: "NAME",
				Description: "Copies the tasks of --from and --service that --severity, --category and --what select (as\n" +
					"cortexq rerun and cortexq report select them; none: every task) into a new corpus NAME, as TODO\n" +
					"tasks of its first run, ready for the replicas. A selection holding no task makes no sandbox. The\n" +
					"sandbox starts at fair-share priority 1 (--priority), so replicas serve its tasks before those of\n" +
					"corpora at the default 0 (see cortexq corpus).",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "from", Usage: "the corpus whose tasks to copy", EnvVars: envVars("SANDBOX_FROM")},
					serviceFlag("service of the tasks"),
					&cli.StringFlag{Name: "note", Usage: "note kept with the sandbox's first run (default: sandbox of CORPUS)",
						EnvVars: envVars("SANDBOX_NOTE")},
					&cli.IntFlag{Name: "priority", Value: catalog.SandboxPriority,
						Usage:   "fair-share priority of the sandbox for the service (see cortexq corpus set): above the corpora's default 0, its tasks go first",
						EnvVars: envVars("SANDBOX_PRIORITY")},
				}, selectionFlags("sandbox")...),
				Action: runSandboxCreate,
			},
			{
				Name:   "list",
				Usage:  "list the sandboxes, with their parents and tasks",
				Action: runSandboxList,
				Flags:  formatFlags("sandbox"),
			},
			{
				Name:      "delete",
				Usage:     "delete a sandbox: its tasks, runs and result archives (nothing of its parent)",
				ArgsUsage: "NAME",
				Description: "Deletes the sandbox's tasks (with their leases, attempts and messages), its runs, the corpus,\n" +
					"and then its result archives (<service>.sandbox-<id>.zip beside each source). Pause it first if\n" +
					"replicas are serving it: a result arriving for a deleted task is dropped. A corpus that is not a\n" +
					"sandbox is refused. Without --yes it changes nothing: it prints the number of tasks it would delete.",
				Flags:  []cli.Flag{yesFlag("SANDBOX_DELETE_YES")},
				Action: runSandboxDelete,
			},
		},
	}
}

// oneName returns the one positional argument, NAME.
func oneName(c *cli.Context) (string, error) {
	args, err := positional(c)
	if err != nil {
		return "", err
	}
	if len(args) != 1 || args[0] == "" {
		return "", usagef(c, "want one argument, NAME")
	}
	return args[0], nil
}

func runSandboxCreate(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	if err := required(c, "from", flagService); err != nil {
		return err
	}
	if err := catalog.CheckCorpusName(name); err != nil {
		return usagef(c, "sandbox name: %v", err)
	}
	scope, err := selectionOf(c)
	if err != nil {
		return err
	}
	_, priority, err := shareFlags(c)
	if err != nil {
		return err
	}
	if priority == nil {
		p := int32(catalog.SandboxPriority)
		priority = &p
	}
	scope.Note = c.String("note")
	if scope.Note == "" {
		scope.Note = "sandbox of " + c.String("from")
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	ids, err := root.Catalog.LookupScope(c.Context, c.String("from"), c.String(flagService))
	if errors.Is(err, queue.ErrNotFound) {
		return usagef(c, "%v", err)
	}
	if err != nil {
		return err
	}
	scope.CorpusID, scope.ServiceID = ids.CorpusID, ids.ServiceID
	sum, err := root.Reports.CreateSandbox(c.Context, name, scope, *priority)
	if errors.Is(err, queue.ErrDuplicate) {
		return usagef(c, "a corpus named %s already exists", name)
	}
	if errors.Is(err, queue.ErrNotFound) {
		return usagef(c, "%v", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "sandbox %s (corpus id %d) of corpus %s, service %s: %d tasks copied as TODO, priority %d; results go to %s.sandbox-%d.zip beside each source\n",
		printable(name), sum.ID, printable(c.String("from")), printable(c.String(flagService)), sum.Tasks, *priority, printable(c.String(flagService)), sum.ID)
	return nil
}

func runSandboxList(c *cli.Context) error {
	root, done, err := openListBase(c)
	if err != nil {
		return err
	}
	defer done()
	boxes, err := root.Reports.Sandboxes(c.Context)
	if err != nil {
		return err
	}
	if boxes == nil {
		boxes = []reports.Sandbox{}
	}
	t := table{Title: fmt.Sprintf("%d sandboxes", len(boxes)), Header: []string{"id", "name", "parent", "created", "tasks"}, JSON: boxes}
	for _, b := range boxes {
		t.Rows = append(t.Rows, []string{strconv.Itoa(int(b.ID)), b.Name, b.Parent, zoned(b.CreatedAt, time.DateTime),
			strconv.FormatInt(b.Tasks, 10)})
	}
	return t.print(c)
}

func runSandboxDelete(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	noteOf(c).Target = "sandbox " + name
	boxes, err := root.Reports.Sandboxes(c.Context)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(boxes, func(b reports.Sandbox) bool { return b.Name == name })
	if i < 0 {
		return usagef(c, "no sandbox named %s", name)
	}
	if !confirm(c, boxes[i].Tasks, fmt.Sprintf("sandbox %s: its %d tasks, its runs and their result archives would be deleted", name, boxes[i].Tasks)) {
		return nil
	}
	sum, err := root.Reports.DeleteSandbox(c.Context, name)
	if errors.Is(err, queue.ErrNotFound) {
		return usagef(c, "no sandbox named %s", name)
	}
	if err != nil {
		return err
	}
	noteOf(c).matched(int64(sum.Tasks))
	fmt.Fprintf(c.App.Writer, "sandbox %s deleted: %d tasks, %d result archives\n", name, sum.Tasks, sum.Archives)
	return nil
}
