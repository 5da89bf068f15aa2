package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// The audit log (docs/audit-log.md): every mutating command appends one row to audit_log
// (migrations/00035_audit_log.sql), whether it acted, only previewed, was refused or failed.

// auditedCommands are the commands that change the database, by full name: each appends an
// audit row when the function returns true for its context (verify only mutates with
// --requeue). Every other leaf command of the tree is in notAudited, with the reason; the test
// TestAuditCoversCommands keeps the two lists covering the tree.
var auditedCommands = map[string]func(*cli.Context) bool{
	"rerun": always, "pause": always, "resume": always, "prune": always, "import": always,
	"sandbox create": always, "sandbox delete": always,
	"keys allow": always, "keys revoke": always,
	"service add": always, "corpus set": always,
	"token create": always, "token revoke": always,
	"service delete": always, "corpus add": always, "corpus delete": always,
	"activate": always, "extend": always, "deactivate": always,
	"verify": func(c *cli.Context) bool { return c.Bool("requeue") },
}

func always(*cli.Context) bool { return true }

// notAudited are the leaf commands that append no audit row, and why.
var notAudited = map[string]string{
	"status": "reads", "report": "reads", "runs": "reads", "diff": "reads", "why": "reads",
	"task show": "reads", "service list": "reads", "corpus list": "reads", "sandbox list": "reads",
	"keys list": "reads", "keys gen": "writes a file, not the database", "keys public": "reads a file",
	"version": "reads", "healthcheck": "reads", "web": "the dashboard audits its own actions", "audit": "reads", "token list": "reads",
	"serve": "a replica: dispatch, not an operator's change", "worker echo": "a worker: no database",
	"worker exec": "a worker: no database", "worker latexml": "a worker: no database",
	"sweep": "housekeeping a replica also does", "fold": "housekeeping a replica also does",
	"bench": "a benchmark on its own database", "demo": "a demonstration on its own database",
	"migrate up":   "schema changes: goose's version table records them",
	"migrate down": "schema changes: goose's version table records them", "migrate status": "reads",
	"db start": "the embedded server, not its data", "db stop": "the embedded server, not its data",
	"db url": "reads", "db psql": "an interactive session",
	"db grant-audit": "roles: PostgreSQL's catalog records them", "db grant-replica": "roles: PostgreSQL's catalog records them",
}

// auditNote is what a mutating command's action tells its audit row.
type auditNote struct {
	Target  string
	Matched *int64 // blast radius: tasks matched
	DryRun  bool
}

const auditNoteKey = "cortexq.audit"

// noteOf returns the audit note of c's command, kept in the app's metadata for its wrapper.
func noteOf(c *cli.Context) *auditNote {
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	n, ok := c.App.Metadata[auditNoteKey].(*auditNote)
	if !ok {
		n = &auditNote{}
		c.App.Metadata[auditNoteKey] = n
	}
	return n
}

// matched records a mutation's blast radius for its audit row.
func (n *auditNote) matched(tasks int64) { n.Matched = &tasks }

// audited wraps the action of an audited command: it runs it, then appends its row. A row that
// cannot be written is an error of the command, even when the action succeeded.
func audited(act cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		err := act(c)
		name := strings.TrimPrefix(helpName(c), c.App.Name+" ")
		if errors.Is(err, errHelpShown) || !auditedCommands[name](c) {
			return err
		}
		if aerr := appendAudit(c, name, err); aerr != nil {
			if err != nil {
				return fmt.Errorf("%w (and its audit row could not be written: %v)", err, aerr)
			}
			return fmt.Errorf("done, but its audit row could not be written: %w", aerr)
		}
		return err
	}
}

func appendAudit(c *cli.Context, name string, actErr error) error {
	note := noteOf(c)
	row := dbsqlc.AuditLogAppendParams{Actor: osUser(), Surface: "cli", Action: name, Target: note.Target,
		Matched: note.Matched, Outcome: "ok"}
	var u usageError
	switch {
	case errors.As(actErr, &u):
		row.Outcome, row.Error = "refused", actErr.Error()
	case actErr != nil:
		row.Outcome, row.Error = "failed", actErr.Error()
	case note.DryRun:
		row.Outcome = "dry_run"
	}
	if actErr != nil && noDatabaseYet(c) {
		return nil // an attempt that failed before any database existed: none to record it in, none made for it
	}
	params, err := json.Marshal(auditParameters(c))
	if err != nil {
		return err
	}
	row.Parameters = params
	// The action's context may be cancelled (an interrupted import): the row is still written.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context), 30*time.Second)
	defer cancel()
	c.Context = ctx
	pool, err := connect(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	return dbsqlc.New(pool).AuditLogAppend(ctx, row)
}

// noDatabaseYet reports that the commands would use an embedded cluster not created yet.
func noDatabaseYet(c *cli.Context) bool {
	if c.String(flagDatabaseURL) != "" {
		return false
	}
	cl, err := embedded(c)
	return err == nil && !cl.Initialized()
}

// auditParameters are the flags given to c's command and its arguments; a flag whose value is a
// secret (a password) is recorded as given, not its value.
func auditParameters(c *cli.Context) map[string]any {
	out := map[string]any{}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		if strings.Contains(name, "password") || strings.Contains(name, "secret") {
			out[name] = "(given)"
			continue
		}
		out[name] = fmt.Sprint(c.Value(name))
	}
	if args := c.Args().Slice(); len(args) > 0 {
		out["args"] = args
	}
	return out
}

// osUser names the operating-system user running the command.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if s := os.Getenv("USER"); s != "" {
		return s
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}
