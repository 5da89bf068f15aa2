package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/pgembed"
)

func dbCommand() *cli.Command {
	return &cli.Command{
		Name:  "db",
		Usage: "run the embedded PostgreSQL",
		Description: "Without --database-url (or $DATABASE_URL) every command uses a PostgreSQL cluster of its own in\n" +
			"--home ($CORTEXQ_HOME, default ./.cortexq): made with the local PostgreSQL binaries (--pg-bin) and\n" +
			"migrated on first use, started on demand, stopped only by `cortexq db stop`. It listens on a unix\n" +
			"socket only (in --home/run or, when that path is too long, in a private directory of a random name\n" +
			"in /tmp, recorded in --home/socket_dir), reachable by its owner alone, with durable settings (fsync\n" +
			"on). As root the cluster runs as the postgres user, and the directories on the way to --home are\n" +
			"made traversable (o+x) for it; this is logged.",
		Subcommands: []*cli.Command{
			{
				Name:   "start",
				Usage:  "create (on first use), migrate and start the embedded cluster",
				Action: dbStart,
			},
			{
				Name:   "stop",
				Usage:  "stop the embedded cluster",
				Action: dbStop,
			},
			{
				Name:   "url",
				Usage:  "print the connection string the commands use (starting the embedded cluster if need be)",
				Action: dbURL,
			},
			{
				Name:      "psql",
				Usage:     "run psql on the database the commands use",
				ArgsUsage: "[PSQL ARGS...]",
				// Everything after psql goes to psql, flags included.
				SkipFlagParsing: true,
				Action:          dbPsql,
			},
			grantAuditCommand(),
			grantReplicaCommand(),
		},
	}
}

func dbStart(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := notWithDatabaseURL(c); err != nil {
		return err
	}
	cl, err := embedded(c)
	if err != nil {
		return err
	}
	started, err := cl.Start(c.Context)
	if err != nil {
		return err
	}
	if started {
		fmt.Fprintf(c.App.Writer, "started the embedded PostgreSQL in %s\n", cl.Dir())
	} else {
		fmt.Fprintf(c.App.Writer, "the embedded PostgreSQL in %s is running\n", cl.Dir())
	}
	return nil
}

func dbStop(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := notWithDatabaseURL(c); err != nil {
		return err
	}
	cl, err := embedded(c)
	if err != nil {
		return err
	}
	stopped, err := cl.Stop(c.Context)
	if err != nil {
		return err
	}
	if stopped {
		fmt.Fprintf(c.App.Writer, "stopped the embedded PostgreSQL in %s\n", cl.Dir())
	} else {
		fmt.Fprintf(c.App.Writer, "the embedded PostgreSQL in %s is not running\n", cl.Dir())
	}
	return nil
}

// notWithDatabaseURL refuses to start or stop the embedded cluster while the commands use
// another database: the operator would be looking at the wrong one.
func notWithDatabaseURL(c *cli.Context) error {
	if c.String(flagDatabaseURL) == "" {
		return nil
	}
	return fmt.Errorf("--database-url (or $DATABASE_URL) is set: the commands use that database, not the " +
		"embedded one in --home; unset it to manage the embedded cluster")
}

func dbURL(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	dsn, err := databaseURL(c)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, dsn)
	return nil
}

// dbPsql replaces this process with psql on the database.
func dbPsql(c *cli.Context) error {
	dsn, err := databaseURL(c)
	if err != nil {
		return err
	}
	psql, err := exec.LookPath("psql")
	if c.String(flagDatabaseURL) == "" || err != nil {
		// The embedded cluster's own psql matches its server.
		if cl, cerr := embedded(c); cerr == nil {
			if p := filepath.Join(cl.BinDir(), "psql"); isExecutable(p) {
				psql, err = p, nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("psql not found: %w", err)
	}
	// The password goes to psql through its environment: its arguments are anyone's to read (ps).
	dsn, password := pgembed.SplitPassword(dsn)
	env := os.Environ()
	if password != "" {
		env = append(env, "PGPASSWORD="+password)
	}
	argv := append([]string{"psql", dsn}, c.Args().Slice()...)
	if err := syscall.Exec(psql, argv, env); err != nil {
		return fmt.Errorf("run %s: %w", psql, err)
	}
	return nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
