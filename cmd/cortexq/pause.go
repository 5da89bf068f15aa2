package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/lease"
)

func pauseCommand() *cli.Command {
	return &cli.Command{
		Name:  "pause",
		Usage: "stop leasing the TODO tasks of a corpus and service (leased work finishes)",
		Description: "Moves the TODO tasks of the corpus and service to blocked (status -6): no replica leases them\n" +
			"until cortexq resume. Tasks replicas reserved and have not handed to a worker are taken back and\n" +
			"blocked with them (a replica drops them from its stock within a second). Tasks already leased,\n" +
			"and retries of expired leases (reserved or not), go on.",
		Flags: []cli.Flag{
			corpusFlag("corpus to pause"),
			serviceFlag("service to pause"),
		},
		Action: runPause,
	}
}

func runPause(c *cli.Context) error {
	return onScope(c, func(root *base.Base, scope queue.Scope) error {
		sum, err := root.Lease(lease.Config{}).Pause(c.Context, scope)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "corpus %s, service %s: paused, %d TODO tasks blocked; %d reservations taken back from replicas (%d tasks blocked, %d retries queued again)\n",
			c.String(flagCorpus), c.String(flagService), sum.Blocked, sum.Unreserved+sum.Requeued, sum.Unreserved, sum.Requeued)
		return nil
	})
}
