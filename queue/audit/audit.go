// Package audit appends rows to cortexq's append-only audit log (docs/audit-log.md,
// migrations/00035_audit_log.sql) for every surface: the CLI, the dashboard and the API each
// describe a mutation as a Row and append it here, so that the three write the same columns the
// same way.
package audit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// The surfaces a row comes from.
const (
	CLI = "cli"
	Web = "web"
	API = "api"
)

// The outcomes of an action.
const (
	OK      = "ok"      // done
	DryRun  = "dry_run" // previewed: nothing changed
	Refused = "refused" // refused: bad input, not signed in, not allowed, locked out
	Failed  = "failed"  // an error while acting
)

// Unknown is the actor of an attempt whose owner is not known (a wrong token, no session).
const Unknown = "(unknown)"

// Row is one mutation: who did what to what, with which parameters, how many tasks it
// matched (its blast radius; nil: not a task action), and how it went.
type Row struct {
	Actor      string
	Surface    string
	Action     string
	Target     string
	Parameters map[string]any
	Matched    *int64
	Outcome    string
	Error      string
}

// Append appends row to the audit log through db. Its time and database role are the server's
// (a trigger sets them). It writes even when ctx is cancelled (an interrupted action is still
// recorded), within 30 s.
func Append(ctx context.Context, db dbsqlc.DBTX, row Row) error {
	if row.Parameters == nil {
		row.Parameters = map[string]any{}
	}
	params, err := json.Marshal(row.Parameters)
	if err != nil {
		return err
	}
	if row.Actor == "" {
		row.Actor = Unknown
	}
	if row.Outcome == "" {
		row.Outcome = OK
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return dbsqlc.New(db).AuditLogAppend(ctx, dbsqlc.AuditLogAppendParams{Actor: row.Actor, Surface: row.Surface,
		Action: row.Action, Target: row.Target, Parameters: params, Matched: row.Matched, Outcome: row.Outcome, Error: row.Error})
}

// List lists the rows since a time, newest first, of one actor (its owner, operating-system
// user or database role) if actor is not empty, at most limit.
func List(ctx context.Context, db dbsqlc.DBTX, since time.Time, actor string, limit int) ([]dbsqlc.AuditLog, error) {
	var a *string
	if actor != "" {
		a = &actor
	}
	rows, err := dbsqlc.New(db).AuditLogList(ctx, since, a, int32(limit))
	if rows == nil {
		rows = []dbsqlc.AuditLog{}
	}
	return rows, err
}

// Prune deletes the audit rows older than age, and the sessions ended or expired longer ago,
// in one transaction that lets the append-only trigger pass a DELETE (cortexq prune --tables
// --audit-age; only the table's owner has the privilege).
func Prune(ctx context.Context, pool *pgxpool.Pool, age time.Duration) (rows, sessions int64, err error) {
	secs := int64(age / time.Second)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('cortexq.audit_prune', 'on', true)`); err != nil {
			return err
		}
		q := dbsqlc.New(tx)
		if rows, err = q.AuditLogPrune(ctx, secs); err != nil {
			return err
		}
		sessions, err = q.SessionPrune(ctx, secs)
		return err
	})
	return rows, sessions, err
}
