package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/lease"
)

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:        "resume",
		Usage:       "lease the tasks of a paused corpus and service again",
		Description: "Moves the blocked tasks (status -6) of the corpus and service back to TODO.",
		Flags: []cli.Flag{
			corpusFlag("corpus to resume"),
			serviceFlag("service to resume"),
		},
		Action: runResume,
	}
}

func runResume(c *cli.Context) error {
	return onScope(c, func(root *base.Base, scope queue.Scope) error {
		n, err := root.Lease(lease.Config{}).Resume(c.Context, scope)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "corpus %s, service %s: resumed, %d tasks back to TODO\n",
			c.String(flagCorpus), c.String(flagService), n)
		return nil
	})
}
