package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "list the audit log: who changed what, when, and how it went",
		Description: "Lists the rows of the audit log (docs/audit-log.md), newest first: every mutating command\n" +
			"(rerun, pause, resume, prune, import, sandbox create and delete, keys allow and revoke, service add,\n" +
			"corpus set, verify --requeue) appends one, previews (outcome dry_run), refused and failed attempts\n" +
			"included. Each names its time (the database's clock), actor (the operating-system user), database\n" +
			"role, surface, action, target, the tasks it matched and its outcome. The log is append-only.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "actor", Usage: "only the rows of this actor or database role", EnvVars: envVars("AUDIT_ACTOR")},
			&cli.DurationFlag{Name: "since", Usage: "only the rows of this long ago until now (by the database's clock)", Value: 7 * 24 * time.Hour, EnvVars: envVars("AUDIT_SINCE")},
			&cli.IntFlag{Name: "limit", Usage: "at most this many rows, the newest", Value: 1000, EnvVars: envVars("AUDIT_LIMIT")},
			&cli.BoolFlag{Name: "json", Usage: "print each row as a JSON line", EnvVars: envVars("AUDIT_JSON")},
		},
		Action: runAudit,
	}
}

func runAudit(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if c.Duration("since") <= 0 {
		return usagef(c, "--since: want a positive duration")
	}
	if n := c.Int("limit"); n <= 0 || n > 1_000_000 {
		return usagef(c, "--limit: want 1 to 1000000")
	}
	pool, err := connect(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := checkMigrated(c.Context, pool); err != nil {
		return err
	}
	var now time.Time
	if err := pool.QueryRow(c.Context, `SELECT now()`).Scan(&now); err != nil {
		return fmt.Errorf("read the database's clock: %w", err)
	}
	var actor *string
	if a := c.String("actor"); a != "" {
		actor = &a
	}
	rows, err := dbsqlc.New(pool).AuditLogList(c.Context, now.Add(-c.Duration("since")), actor, int32(c.Int("limit")))
	if err != nil {
		return fmt.Errorf("read the audit log: %w", err)
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	return printAudit(c, rows)
}

// printAudit prints audit rows as a table, each text printable on one line.
func printAudit(c *cli.Context, rows []dbsqlc.AuditLog) error {
	if len(rows) == 0 {
		fmt.Fprintln(c.App.Writer, "no audit rows")
		return nil
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tACTOR\tROLE\tSURFACE\tACTION\tTARGET\tMATCHED\tOUTCOME\tERROR")
	for _, r := range rows {
		matched := "-"
		if r.Matched != nil {
			matched = fmt.Sprint(*r.Matched)
		}
		cells := []string{zoned(r.At, "2006-01-02 15:04:05"), r.Actor, r.DbRole, r.Surface, r.Action, r.Target, matched, r.Outcome, r.Error}
		for i := range cells {
			cells[i] = oneLine(printable(cells[i]))
			if cells[i] == "" {
				cells[i] = "-"
			}
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}
