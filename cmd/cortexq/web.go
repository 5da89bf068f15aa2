package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/internal/version"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/web"
)

func webCommand() *cli.Command {
	return &cli.Command{
		Name:  "web",
		Usage: "serve the web dashboard: progress, reports, runs, tasks and workers in a browser",
		Description: "Serves server-rendered pages (no JavaScript needed; a small script refreshes the overview's\n" +
			"figures every 2 s) of what status, report, runs, diff and task show, from the same queries. It\n" +
			"runs beside any replica or alone: it only needs the database (and, for the archive downloads and\n" +
			"previews, the corpus directories at the paths the replicas see).\n" +
			"\n" +
			"People sign in with their own tokens (cortexq token create) and get the buttons their role\n" +
			"allows: rerun a slice, pause, resume, make a sandbox of a slice; --admin-token (better:\n" +
			"$CORTEXQ_ADMIN_TOKEN, or --admin-token-file) is the break-glass owner admin. Every action\n" +
			"appends an audit row. --read-only refuses every action whatever the token, and opens its database sessions\n" +
			"read-only: give it the --database-url of an audit role (cortexq db grant-audit --login). See\n" +
			"docs/web.md for running it behind a reverse proxy. With --passkey-rp-id, people sign in with\n" +
			"passkeys too (docs/security.md#passkeys).",
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    "listen",
				Usage:   "address to serve HTTP on",
				Value:   "127.0.0.1:8080",
				EnvVars: envVars("WEB_LISTEN"),
			},
			&cli.StringFlag{
				Name:    "admin-token",
				Usage:   "break-glass token of the owner admin (at least 16 characters); empty: people's tokens only; prefer the environment variable",
				EnvVars: envVars("ADMIN_TOKEN"),
			},
			&cli.StringFlag{
				Name:    "admin-token-file",
				Usage:   "read the admin token from this file (a Docker or systemd secret; surrounding blanks ignored) instead of --admin-token",
				EnvVars: envVars("ADMIN_TOKEN_FILE"),
			},
			&cli.StringFlag{
				Name:    "preview-origin",
				Usage:   "serve the result previews from this origin (https://preview.example.org, a second host name of this dashboard) instead of the dashboard's own",
				EnvVars: envVars("WEB_PREVIEW_ORIGIN"),
			},
			&cli.StringFlag{
				Name:    "passkey-rp-id",
				Usage:   "turn passkeys on: the WebAuthn relying party id, the dashboard's domain as browsers reach it (cortexq.example.org; not an IP address); docs/security.md#passkeys",
				EnvVars: envVars("PASSKEY_RP_ID"),
			},
			&cli.StringSliceFlag{
				Name:    "passkey-origin",
				Usage:   "an origin browsers reach the dashboard at, for passkeys (https://cortexq.example.org; repeat, or separate by commas); default https://RP-ID",
				EnvVars: envVars("PASSKEY_ORIGINS"),
			},
			&cli.BoolFlag{
				Name:    "read-only",
				Usage:   "no actions, whatever the token, and read-only database sessions (for an audit role's --database-url)",
				EnvVars: envVars("WEB_READ_ONLY"),
			},
		},
		Action: runWeb,
	}
}

// minAdminToken is the shortest admin token accepted.
const minAdminToken = 16

func runWeb(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	token, readOnly := c.String("admin-token"), c.Bool("read-only")
	if f := c.String("admin-token-file"); f != "" {
		if token != "" {
			return usagef(c, "give --admin-token or --admin-token-file, not both")
		}
		var err error
		if token, err = readSecretFile(f); err != nil {
			return fmt.Errorf("--admin-token-file: %w", err)
		}
	}
	if token != "" && len(token) < minAdminToken {
		return usagef(c, "--admin-token: want at least %d characters", minAdminToken)
	}
	tune := []func(*pgxpool.Config){reports.TuneReportPool}
	if readOnly {
		tune = append(tune, func(cfg *pgxpool.Config) {
			cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
		})
	}
	pool, err := connect(c, tune...)
	if err != nil {
		return err
	}
	defer pool.Close()
	// An audit role may not read goose's version table; a writer's dashboard checks the schema.
	if !readOnly {
		if err := checkMigrated(c.Context, pool); err != nil {
			return err
		}
	}
	root := base.New(pool, nil, slog.Default())
	srv, err := web.New(web.Config{Base: root, Store: root.Lease(lease.Config{}), AdminToken: token, ReadOnly: readOnly, Logger: slog.Default(),
		Jobs:          jobops.Registry(version.Release()),
		PreviewOrigin: c.String("preview-origin"), PasskeyRPID: c.String("passkey-rp-id"), PasskeyOrigins: c.StringSlice("passkey-origin")})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.String("listen"))
	if err != nil {
		return fmt.Errorf("--listen %s: %w", c.String("listen"), err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		slog.Warn("the dashboard is served beyond loopback over plain HTTP: put it behind a TLS reverse proxy (docs/web.md)",
			"listen", ln.Addr().String())
	}
	mode := "actions for people signed in with their tokens (no admin token)"
	switch {
	case readOnly:
		mode = "read-only (--read-only)"
	case token != "":
		mode = "actions for people signed in with their tokens, or the admin token"
	}
	logVersion(slog.Default(), "web dashboard")
	slog.Info("web dashboard", "url", "http://"+ln.Addr().String()+"/", "mode", mode)
	hs := srv.HTTPServer()
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-c.Context.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
