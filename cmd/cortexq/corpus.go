package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/catalog"
)

func corpusCommand() *cli.Command {
	return &cli.Command{
		Name:  "corpus",
		Usage: "add and delete corpora; set and list the fair share of each: its weight and priority for a service",
		Description: "Replicas reserve a service's TODO tasks corpus by corpus: the corpora (and sandboxes) of the\n" +
			"highest priority with TODO tasks first, and within one priority in proportion to their weights,\n" +
			"each in task id order, so that a small corpus is not stuck behind another's backlog. A corpus\n" +
			"starts at weight 1 and priority 0; a sandbox at priority 1 (see cortexq sandbox create --priority).\n" +
			"Queued retries go first whatever the share. See docs/semantics.md#fair-share.",
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "set the weight and priority of a corpus for a service",
				ArgsUsage: "NAME",
				Description: "Sets what --weight and --priority give (the other stays as it is) for corpus NAME and --service;\n" +
					"the corpus need not have tasks of the service yet. Replicas apply it from their next reservation.",
				Flags: []cli.Flag{
					serviceFlag("service of the corpus's tasks"),
					&cli.IntFlag{Name: "weight", Usage: fmt.Sprintf("share within its priority, relative to the other corpora's (%d to %d; a corpus starts at 1)",
						catalog.WeightMin, catalog.WeightMax), DefaultText: "unchanged", EnvVars: envVars("CORPUS_WEIGHT")},
					&cli.IntFlag{Name: "priority", Usage: fmt.Sprintf("served strictly before every corpus of a lower one (%d to %d; a corpus starts at 0, a sandbox at %d)",
						catalog.PriorityMin, catalog.PriorityMax, catalog.SandboxPriority), DefaultText: "unchanged", EnvVars: envVars("CORPUS_PRIORITY")},
				},
				Action: runCorpusSet,
			},
			{
				Name:  "list",
				Usage: "list the weight, priority, TODO tasks and share of the last minute's leases of each corpus",
				Description: "One row per corpus and service with tasks (or a share set): weight, priority, TODO tasks, the\n" +
					"leases of the last minute and their share of the service's leases, highest priority first.",
				Flags:  append([]cli.Flag{serviceFlag("only this service")}, formatFlags("corpus")...),
				Action: runCorpusList,
			},
			corpusAddCommand(),
			corpusDeleteCommand(),
		},
	}
}

// shareFlags returns --weight and --priority, nil where not given, checked.
func shareFlags(c *cli.Context) (weight, priority *int32, err error) {
	for _, f := range []struct {
		name     string
		min, max int
		to       **int32
	}{{"weight", catalog.WeightMin, catalog.WeightMax, &weight}, {"priority", catalog.PriorityMin, catalog.PriorityMax, &priority}} {
		if !c.IsSet(f.name) {
			continue
		}
		v := c.Int(f.name)
		if v < f.min || v > f.max {
			return nil, nil, usagef(c, "--%s %d: want %d to %d", f.name, v, f.min, f.max)
		}
		n := int32(v)
		*f.to = &n
	}
	return weight, priority, nil
}

func runCorpusSet(c *cli.Context) error {
	args, err := positional(c)
	if err != nil {
		return err
	}
	if len(args) != 1 || args[0] == "" {
		return usagef(c, "want one argument, the corpus's NAME")
	}
	if err := required(c, flagService); err != nil {
		return err
	}
	weight, priority, err := shareFlags(c)
	if err != nil {
		return err
	}
	if weight == nil && priority == nil {
		return usagef(c, "give --weight, --priority or both")
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	scope, err := root.Catalog.LookupScope(c.Context, args[0], c.String(flagService))
	if errors.Is(err, queue.ErrNotFound) {
		return usagef(c, "%v", err)
	}
	if err != nil {
		return err
	}
	w, p, err := root.Catalog.SetShare(c.Context, scope, weight, priority)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "corpus %s, service %s: weight %d, priority %d\n", args[0], c.String(flagService), w, p)
	return nil
}

func runCorpusList(c *cli.Context) error {
	root, done, err := openListBase(c)
	if err != nil {
		return err
	}
	defer done()
	if err := root.Catalog.CheckNames(c.Context, "", c.String(flagService)); errors.Is(err, queue.ErrNotFound) {
		return usagef(c, "%v", err)
	} else if err != nil {
		return err
	}
	shares, err := root.Catalog.Shares(c.Context, c.String(flagService))
	if err != nil {
		return err
	}
	t := table{Title: fmt.Sprintf("%d corpora and services", len(shares)),
		Header: []string{"corpus", "service", "sandbox", "weight", "priority", "todo", "leases/min", "share"}, JSON: api.NewCorpora(shares)}
	for _, s := range shares {
		t.Rows = append(t.Rows, []string{printable(s.Corpus), printable(s.Service), strconv.FormatBool(s.Sandbox),
			strconv.Itoa(int(s.Weight)), strconv.Itoa(int(s.Priority)), strconv.FormatInt(s.TODO, 10),
			strconv.FormatInt(s.LeasesLastMinute, 10), fmt.Sprintf("%.1f%%", 100*s.LeaseShare)})
	}
	return t.print(c)
}
