package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/lease"
)

func pauseCommand() *cli.Command {
	return &cli.Command{
		Name:  "pause",
		Usage: "stop leasing the TODO tasks of a corpus and service (leased work finishes)",
		Description: "Moves the TODO tasks of the corpus and service to blocked (status -6): no replica leases them\n" +
			"until cortexq resume. Tasks already leased, and retries of expired leases, go on.",
		Flags: []cli.Flag{
			corpusFlag("corpus to pause"),
			serviceFlag("service to pause"),
		},
		Action: runPause,
	}
}

func runPause(c *cli.Context) error {
	return onScope(c, func(store *lease.Store, scope lease.Scope) error {
		n, err := store.Pause(c.Context, scope)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "corpus %s, service %s: paused, %d TODO tasks blocked\n",
			c.String(flagCorpus), c.String(flagService), n)
		return nil
	})
}
