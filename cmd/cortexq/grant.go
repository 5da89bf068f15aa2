package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"
)

// auditTables are the tables an audit role may read, besides the audit_* views.
var auditTables = []string{
	"services", "corpora", "tasks", "dispatch", "attempts", "task_messages", "runs", "workers",
	"reaper_passes", "worker_keys",
}

func grantAuditCommand() *cli.Command {
	return &cli.Command{
		Name:      "grant-audit",
		Usage:     "make (or fix) a read-only role for operator audits",
		ArgsUsage: "ROLE",
		Description: "Grants ROLE SELECT on the audit_* views and on the cortexq tables (services, corpora, tasks,\n" +
			"dispatch, attempts, task_messages, runs, workers, reaper_passes, worker_keys), USAGE on their\n" +
			"schema, and nothing else: no write, no River table, and its sessions default to read-only\n" +
			"transactions. A missing role is created NOLOGIN (for SET ROLE or GRANT ROLE TO a person) unless\n" +
			"--login is given. Run it as a role that may create roles (the database owner with CREATEROLE,\n" +
			"or a superuser), and again after `cortexq migrate up` adds views. It refuses a role that is a\n" +
			"superuser or may create roles or databases.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "login", Usage: "let the role log in (a new role; an existing one is altered)", EnvVars: envVars("AUDIT_LOGIN")},
			&cli.StringFlag{Name: "password", Usage: "the role's password (implies --login); prefer the environment variable", EnvVars: envVars("AUDIT_PASSWORD")},
		},
		Action: dbGrantAudit,
	}
}

func dbGrantAudit(c *cli.Context) error {
	args, err := positional(c)
	if err != nil {
		return err
	}
	if len(args) != 1 || args[0] == "" {
		return usagef(c, "want one ROLE")
	}
	pool, err := connect(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := grantAudit(c.Context, pool, args[0], c.Bool("login") || c.String("password") != "", c.String("password"))
	if err != nil {
		return err
	}
	verb := "updated"
	if res.created {
		verb = "created"
	}
	fmt.Fprintf(c.App.Writer, "role %s %s (%s): SELECT on %d tables and %d audit views of schema %s, read-only sessions\n",
		args[0], verb, map[bool]string{true: "LOGIN", false: "NOLOGIN"}[res.login], res.tables, res.views, res.schema)
	return nil
}

type grantResult struct {
	created, login bool
	tables, views  int
	schema         string
}

// grantAudit makes role a read-only audit role of the database pool is on, in one transaction.
func grantAudit(ctx context.Context, pool *pgxpool.Pool, role string, login bool, password string) (grantResult, error) {
	var res grantResult
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Identifiers and the password are quoted by the server (format %I, %L).
		exec := func(format string, args ...string) error {
			var stmt string
			if err := tx.QueryRow(ctx, "SELECT format($1::text, VARIADIC $2::text[])", format, args).Scan(&stmt); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, stmt)
			return err
		}
		var super, createRole, createDB, bypass, canLogin bool
		err := tx.QueryRow(ctx, `SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = $1`, role).
			Scan(&super, &createRole, &createDB, &bypass, &canLogin)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			res.created = true
			attrs := "NOLOGIN"
			if login {
				attrs = "LOGIN"
			}
			if err := exec("CREATE ROLE %I "+attrs+" NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS", role); err != nil {
				return fmt.Errorf("create role %s: %w", role, err)
			}
			canLogin = login
		case err != nil:
			return fmt.Errorf("look up role %s: %w", role, err)
		case super || createRole || createDB || bypass:
			return fmt.Errorf("role %s is a superuser or may create roles or databases or bypass row security: not an audit role", role)
		case login && !canLogin:
			if err := exec("ALTER ROLE %I LOGIN", role); err != nil {
				return fmt.Errorf("alter role %s: %w", role, err)
			}
			canLogin = true
		}
		res.login = canLogin
		if password != "" {
			if err := exec("ALTER ROLE %I PASSWORD %L", role, password); err != nil {
				return fmt.Errorf("set the password of %s: %w", role, err)
			}
		}
		if err := exec("ALTER ROLE %I SET default_transaction_read_only = on", role); err != nil {
			return fmt.Errorf("make %s read-only: %w", role, err)
		}
		var db string
		if err := tx.QueryRow(ctx, "SELECT current_database(), current_schema()").Scan(&db, &res.schema); err != nil {
			return err
		}
		if err := exec("GRANT CONNECT ON DATABASE %I TO %I", db, role); err != nil {
			return fmt.Errorf("grant connect: %w", err)
		}
		if err := exec("GRANT USAGE ON SCHEMA %I TO %I", res.schema, role); err != nil {
			return fmt.Errorf("grant schema usage: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT table_name::text, table_type = 'VIEW' FROM information_schema.tables
			WHERE table_schema = current_schema() AND (table_name = ANY($1) OR (table_type = 'VIEW' AND table_name LIKE 'audit\_%'))
			ORDER BY table_name`, auditTables)
		if err != nil {
			return fmt.Errorf("list audit tables: %w", err)
		}
		type rel struct {
			Name string
			View bool
		}
		rels, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rel])
		if err != nil {
			return fmt.Errorf("list audit tables: %w", err)
		}
		for _, r := range rels {
			if err := exec("GRANT SELECT ON %I.%I TO %I", res.schema, r.Name, role); err != nil {
				return fmt.Errorf("grant select on %s: %w", r.Name, err)
			}
			if r.View {
				res.views++
			} else {
				res.tables++
			}
		}
		if res.tables < len(auditTables) {
			return fmt.Errorf("only %d of the %d cortexq tables found in schema %s: run `cortexq migrate up` first", res.tables, len(auditTables), res.schema)
		}
		return nil
	})
	return res, err
}
