package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

func sessionCommand() *cli.Command {
	return &cli.Command{
		Name:  "session",
		Usage: "list and revoke the dashboard's and the API's sign-in sessions",
		Description: "A session starts when someone signs in to the dashboard (with a token or a passkey); the\n" +
			"database keeps its owner, role, the token it signed in with, when it started and was last seen,\n" +
			"and from where (address and browser), and only a digest of its cookie. Revoking ends it at\n" +
			"once: its next request is refused. `cortexq token revoke` ends the sessions of the tokens it\n" +
			"revokes (with --owner, every session of the owner). See docs/security.md#sessions.",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list the live sessions (of an owner)",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "owner", Usage: "only this owner's sessions", EnvVars: envVars("SESSION_OWNER")},
					&cli.BoolFlag{Name: "ended", Usage: "the ended and expired sessions too", EnvVars: envVars("SESSION_ENDED")},
				}, formatFlags("session")...),
				Action: runSessionList,
			},
			{
				Name:  "revoke",
				Usage: "end a session by id, or every session of an owner",
				Flags: []cli.Flag{
					&cli.Int64Flag{Name: "id", Usage: "the session's id (cortexq session list)", EnvVars: envVars("SESSION_ID")},
					&cli.StringFlag{Name: "owner", Usage: "end every session of this owner instead", EnvVars: envVars("SESSION_REVOKE_OWNER")},
				},
				Action: runSessionRevoke,
			},
		},
	}
}

func runSessionList(c *cli.Context) error {
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
	var owner *string
	if o := c.String("owner"); o != "" {
		owner = &o
	}
	rows, err := dbsqlc.New(pool).SessionList(c.Context, owner, c.Bool("ended"), 10_000)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []dbsqlc.SessionListRow{}
	}
	t := table{Title: fmt.Sprintf("%d sessions", len(rows)),
		Header: []string{"id", "owner", "role", "token", "started", "last seen", "from", "browser", "ended"}, JSON: rows}
	for _, r := range rows {
		tok, ended := "-", "-"
		if r.TokenID != nil {
			tok = strconv.FormatInt(*r.TokenID, 10)
		}
		if r.EndedAt != nil {
			ended = zoned(*r.EndedAt, time.DateTime) + " (" + printable(r.EndedWhy) + ")"
		}
		t.Rows = append(t.Rows, []string{strconv.FormatInt(r.ID, 10), printable(r.Owner), r.Role, tok,
			zoned(r.StartedAt, time.DateTime), zoned(r.LastSeen, time.DateTime), printable(r.Remote), printable(r.UserAgent), ended})
	}
	return t.print(c)
}

func runSessionRevoke(c *cli.Context) error {
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
		noteOf(c).Target = fmt.Sprintf("session %d", v)
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
	n, err := dbsqlc.New(pool).SessionRevoke(c.Context, "revoked (cortexq session revoke)", id, owner, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%d sessions ended\n", n)
	return nil
}
