package main

import (
	"errors"
	"fmt"
	"regexp"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/catalog"
)

func serviceCommand() *cli.Command {
	return &cli.Command{
		Name:  "service",
		Usage: "add, list or delete worker services",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a worker service (tex_to_html, echo, ...)",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{
					&cli.DurationFlag{
						Name:    "lease-timeout",
						Usage:   "how long a worker of this service has for a task before it is retried (whole seconds); 0: the replica's --lease-timeout",
						EnvVars: envVars("SERVICE_LEASE_TIMEOUT"),
					},
				},
				Action: serviceAdd,
			},
			{
				Name:  "list",
				Usage: "list the services",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the services as GET /api/v1/services answers them",
					EnvVars: envVars("SERVICE_LIST_JSON")}},
				Action: serviceList,
			},
			serviceDeleteCommand(),
		},
	}
}

// serviceName is the services.name check of the schema.
var serviceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,199}$`)

func serviceAdd(c *cli.Context) error {
	args, err := positional(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef(c, "want one NAME")
	}
	name := args[0]
	if !serviceName.MatchString(name) {
		return usagef(c, "service name %q: want up to 200 letters, digits and _.+-, starting with a letter or digit", name)
	}
	timeout := c.Duration("lease-timeout")
	if timeout < 0 {
		return usagef(c, "--lease-timeout %s: want a positive duration, or 0", timeout)
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	svc, err := root.Catalog.AddService(c.Context, name, timeout)
	if errors.Is(err, queue.ErrDuplicate) {
		return fmt.Errorf("service %s already exists", name)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "added service %s (id %d, lease %s)\n", svc.Name, svc.ID, leaseText(svc))
	return nil
}

func leaseText(svc catalog.Service) string {
	if svc.LeaseTimeout == 0 {
		return "the replica's default"
	}
	return svc.LeaseTimeout.String()
}

func serviceList(c *cli.Context) error {
	root, done, err := openBaseNoArgs(c)
	if err != nil {
		return err
	}
	defer done()
	services, err := root.Catalog.Services(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c, api.NewServices(services))
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSERVICE\tLEASE")
	for _, s := range services {
		fmt.Fprintf(w, "%d\t%s\t%s\n", s.ID, printable(s.Name), leaseText(s))
	}
	return w.Flush()
}
