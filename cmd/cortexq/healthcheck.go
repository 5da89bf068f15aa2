package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

func healthcheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "healthcheck",
		Usage: "exit 0 when a replica's /healthz answers 200 (for container healthchecks)",
		Description: "Fetches --url and exits 0 on HTTP 200, else prints one line on stderr and exits 1. It needs\n" +
			"no database and no curl, so a container built from the cortexq image can check a replica with:\n\n" +
			"   cortexq healthcheck --url http://127.0.0.1:9464/healthz",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Usage: "the replica's health endpoint", Value: "http://127.0.0.1:9464/healthz", EnvVars: envVars("HEALTHCHECK_URL")},
			&cli.DurationFlag{Name: "timeout", Usage: "give up after this long", Value: 5 * time.Second, EnvVars: envVars("HEALTHCHECK_TIMEOUT")},
		},
		Action: runHealthcheck,
	}
}

func runHealthcheck(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if c.Duration("timeout") <= 0 {
		return usagef(c, "--timeout: want a positive duration")
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.String("url"), nil)
	if err != nil {
		return usagef(c, "--url: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s: %s", c.String("url"), resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
