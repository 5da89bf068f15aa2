package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/audit"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "make, list and revoke the tokens people sign in with, one owner each",
		Description: "A token names its owner and role (viewer reads; operator reruns, pauses, makes sandboxes;\n" +
			"admin also manages tokens). It is printed once, at creation; the database keeps only its SHA-256\n" +
			"digest, so a dump of the database holds no usable token. See docs/audit-log.md#tokens.",
		Subcommands: []*cli.Command{
			{
				Name:  "create",
				Usage: "make a token for an owner, printed once",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "owner", Usage: "who the token is for (required): 1-64 letters, digits, '.', '_', '@' or '-'", EnvVars: envVars("TOKEN_OWNER")},
					&cli.StringFlag{Name: "role", Usage: "viewer, operator or admin (required)", EnvVars: envVars("TOKEN_ROLE")},
					&cli.DurationFlag{Name: "expires", Usage: "the token stops working after this long (0: never)", EnvVars: envVars("TOKEN_EXPIRES")},
				},
				Action: runTokenCreate,
			},
			{
				Name:   "list",
				Usage:  "list the tokens (never their values)",
				Flags:  formatFlags("token"),
				Action: runTokenList,
			},
			{
				Name:  "revoke",
				Usage: "revoke a token by id, or every token of an owner",
				Flags: []cli.Flag{
					&cli.Int64Flag{Name: "id", Usage: "the token's id (cortexq token list)", EnvVars: envVars("TOKEN_ID")},
					&cli.StringFlag{Name: "owner", Usage: "revoke every token of this owner instead", EnvVars: envVars("TOKEN_REVOKE_OWNER")},
				},
				Action: runTokenRevoke,
			},
		},
	}
}

func runTokenCreate(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	owner, role := c.String("owner"), c.String("role")
	if !audit.OwnerName.MatchString(owner) {
		return usagef(c, "--owner %q: want 1-64 letters, digits, '.', '_', '@' or '-'", owner)
	}
	if !audit.Roles[role] {
		return usagef(c, "--role %q: want viewer, operator or admin", role)
	}
	if c.Duration("expires") < 0 {
		return usagef(c, "--expires: want a positive duration, or 0 for never")
	}
	noteOf(c).Target = "owner " + owner
	pool, err := connect(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := checkMigrated(c.Context, pool); err != nil {
		return err
	}
	m, err := audit.MintToken(c.Context, pool, owner, role, c.Duration("expires"))
	if err != nil {
		return err
	}
	row, token := m, m.Token
	noteOf(c).Target = fmt.Sprintf("token %d of owner %s", row.ID, owner)
	fmt.Fprintf(c.App.ErrWriter, "token %d for %s (%s): shown once, keep it now; the database keeps only its digest\n", row.ID, owner, role)
	fmt.Fprintln(c.App.Writer, token)
	return nil
}

func runTokenList(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	pool, err := connect(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := checkMigrated(c.Context, pool); err != nil {
		return err
	}
	rows, err := dbsqlc.New(pool).TokenList(c.Context)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []dbsqlc.TokenListRow{}
	}
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return zoned(*t, time.DateTime)
	}
	t := table{Title: fmt.Sprintf("%d tokens", len(rows)), Header: []string{"id", "owner", "role", "created", "expires", "revoked"}, JSON: rows}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{strconv.FormatInt(r.ID, 10), printable(r.Owner), r.Role, zoned(r.CreatedAt, time.DateTime),
			when(r.ExpiresAt), when(r.RevokedAt)})
	}
	return t.print(c)
}

func runTokenRevoke(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if c.IsSet("id") == c.IsSet("owner") {
		return usagef(c, "give --id or --owner, one of them")
	}
	var id *int64
	var owner *string
	if c.IsSet("id") {
		v := c.Int64("id")
		id = &v
		noteOf(c).Target = fmt.Sprintf("token %d", v)
	} else {
		v := c.String("owner")
		owner = &v
		noteOf(c).Target = "owner " + v
	}
	pool, err := connect(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := checkMigrated(c.Context, pool); err != nil {
		return err
	}
	n, ended, err := audit.RevokeTokens(c.Context, pool, id, owner)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%d tokens revoked\n", n)
	if ended > 0 {
		fmt.Fprintf(c.App.Writer, "%d sessions ended\n", ended)
	}
	return nil
}
