package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/migrations"
	"github.com/cortexq/cortexq/queue/lease"
)

func grantAuditCommand() *cli.Command {
	return &cli.Command{
		Name:      "grant-audit",
		Usage:     "make (or fix) a read-only role for operator audits",
		ArgsUsage: "ROLE",
		Description: "Grants ROLE SELECT on the audit_* views and on the cortexq tables and views the schema lists\n" +
			"in audit_readable (services, corpora, tasks, dispatch, attempts, task_messages, runs, workers, ...;\n" +
			"a migration adding one lists it there), USAGE on their schema, and nothing else: no write, no River table, and its\n" +
			"sessions default to read-only transactions. Read-only holds by privileges too, for a session\n" +
			"that turns that default off: the database's TEMPORARY privilege and the large-object creating\n" +
			"functions (lo_creat, lo_create, lo_from_bytea) are revoked from PUBLIC (the database owner and\n" +
			"superusers keep them; cortexq needs neither). The functions' privileges can only be revoked by a\n" +
			"superuser; run by another role the command says what it could not revoke. A missing role is\n" +
			"created NOLOGIN (for SET ROLE or GRANT ROLE TO a person) unless --login is given. A password is sent to the server hashed\n" +
			"(SCRAM-SHA-256), never in clear text. Run it as a role that may create roles (the database owner\n" +
			"with CREATEROLE, or a superuser), and again after `cortexq migrate up` adds views. It refuses a\n" +
			"role that is a superuser or may create roles or databases.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "login", Usage: "let the role log in (a new role; an existing one is altered)", EnvVars: envVars("AUDIT_LOGIN")},
			&cli.StringFlag{Name: "password", Usage: "the role's password (implies --login; printable ASCII, sent hashed); prefer the environment variable", EnvVars: envVars("AUDIT_PASSWORD")},
		},
		Action: dbGrantAudit,
	}
}

// grantTarget reads a grant command's one ROLE and --password, checked, and connects.
func grantTarget(c *cli.Context) (string, *pgxpool.Pool, error) {
	args, err := positional(c)
	if err != nil {
		return "", nil, err
	}
	if len(args) != 1 || args[0] == "" {
		return "", nil, usagef(c, "want one ROLE")
	}
	if err := migrations.CheckPassword(c.String("password")); err != nil {
		return "", nil, usagef(c, "--password: %v", err)
	}
	pool, err := connect(c)
	if err != nil {
		return "", nil, err
	}
	return args[0], pool, nil
}

func dbGrantAudit(c *cli.Context) error {
	role, pool, err := grantTarget(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := migrations.GrantAudit(c.Context, pool, role, c.Bool("login") || c.String("password") != "", c.String("password"))
	if err != nil {
		return err
	}
	verb := "updated"
	if res.Created {
		verb = "created"
	}
	fmt.Fprintf(c.App.Writer, "role %s %s (%s): SELECT on %d tables and %d audit views of schema %s, read-only sessions\n",
		role, verb, map[bool]string{true: "LOGIN", false: "NOLOGIN"}[res.Login], res.Tables, res.Views, res.Schema)
	if len(res.Loose) > 0 {
		fmt.Fprintf(c.App.Writer, "warning: role %s may still use %s: run `cortexq db grant-audit` as a superuser to revoke it\n",
			role, strings.Join(res.Loose, " and "))
	}
	return nil
}

func grantReplicaCommand() *cli.Command {
	return &cli.Command{
		Name:      "grant-replica",
		Usage:     "make (or fix) a role that cortexq serve runs as, owning nothing",
		ArgsUsage: "ROLE",
		Description: "Grants ROLE what a replica needs and nothing more: CONNECT, USAGE on the schema, SELECT, INSERT,\n" +
			"UPDATE and DELETE on the schema's tables (cortexq's and River's; SELECT only on goose's version\n" +
			"table), SELECT on its views, USAGE and SELECT on its sequences; no DDL, no TRUNCATE. It sets the\n" +
			"replica's session settings as the role's defaults (enable_seqscan, jit,\n" +
			"idle_in_transaction_session_timeout: what a transaction-mode pooler lets no client set; see\n" +
			"--pooler). Migrations stay the owner's: run `cortexq migrate up` as the schema's owner, then this\n" +
			"command again (a migration may add tables). A missing role is created NOLOGIN unless --login is\n" +
			"given; a password is sent hashed (SCRAM-SHA-256). It refuses a role that owns anything in the\n" +
			"database, is a superuser, or may create roles or databases. Run it as the owner with CREATEROLE,\n" +
			"or a superuser.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "login", Usage: "let the role log in (a new role; an existing one is altered)", EnvVars: envVars("REPLICA_LOGIN")},
			&cli.StringFlag{Name: "password", Usage: "the role's password (implies --login; printable ASCII, sent hashed); prefer the environment variable", EnvVars: envVars("REPLICA_PASSWORD")},
		},
		Action: dbGrantReplica,
	}
}

func dbGrantReplica(c *cli.Context) error {
	role, pool, err := grantTarget(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	// The settings serve's pool asks for (lease.TunePool), as the role's defaults.
	var tuned pgxpool.Config
	tuned.ConnConfig = &pgx.ConnConfig{}
	lease.TunePool(&tuned)
	res, err := migrations.GrantReplica(c.Context, pool, role, c.Bool("login") || c.String("password") != "", c.String("password"),
		tuned.ConnConfig.RuntimeParams)
	if err != nil {
		return err
	}
	verb := "updated"
	if res.Created {
		verb = "created"
	}
	var settings []string
	for k, v := range tuned.ConnConfig.RuntimeParams {
		settings = append(settings, k+"="+v)
	}
	sort.Strings(settings)
	fmt.Fprintf(c.App.Writer, "role %s %s (%s): read and write on %d tables, read on %d, %d sequences of schema %s; owns nothing; settings %s\n",
		role, verb, map[bool]string{true: "LOGIN", false: "NOLOGIN"}[res.Login], res.Tables, res.Reads, res.Seqs, res.Schema,
		strings.Join(settings, ", "))
	return nil
}
