package migrations

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ReplicaGrant is what GrantReplica did.
type ReplicaGrant struct {
	Created, Login      bool
	Tables, Reads, Seqs int
	Schema              string
}

// versionTable is goose's record of the applied migrations: a replica reads it (Check), only
// migrate up, run as the owner, writes it.
const versionTable = "goose_db_version"

// GrantReplica makes role a role `cortexq serve` can run as, owning nothing, in one
// transaction: CONNECT, USAGE on the schema, SELECT, INSERT, UPDATE and DELETE on its tables
// (cortexq's and River's; SELECT only on goose's version table), SELECT on its views, USAGE
// and SELECT on its sequences, and settings as the role's defaults (ALTER ROLE ... SET: what a
// replica's sessions need, which a transaction-mode pooler lets no client set). No DDL, no
// TRUNCATE, no ownership: migrations run as the schema's owner (docs/operations.md#roles). A
// missing role is created, LOGIN when login is set; password, if not empty, is sent hashed. It
// refuses a role that owns anything in the database, or may do more than a replica.
func GrantReplica(ctx context.Context, pool *pgxpool.Pool, role string, login bool, password string, settings map[string]string) (ReplicaGrant, error) {
	var res ReplicaGrant
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		exec := func(format string, args ...string) error {
			var stmt string
			if err := tx.QueryRow(ctx, "SELECT format($1::text, VARIADIC $2::text[])", format, args).Scan(&stmt); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, stmt)
			return err
		}
		var made AuditGrant
		if err := auditRole(ctx, tx, exec, role, login, password, "a replica role", &made); err != nil {
			return err
		}
		res.Created, res.Login = made.Created, made.Login
		var owned int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles WHERE rolname = $1)`,
			role).Scan(&owned); err != nil {
			return fmt.Errorf("look up what %s owns: %w", role, err)
		}
		if owned > 0 {
			return fmt.Errorf("role %s owns %d tables, views or sequences of this database: a replica role owns nothing (migrations run as the owner)", role, owned)
		}
		var db string
		if err := tx.QueryRow(ctx, "SELECT current_database(), current_schema()").Scan(&db, &res.Schema); err != nil {
			return err
		}
		for _, stmt := range [][]string{
			{"GRANT CONNECT ON DATABASE %I TO %I", db, role},
			{"GRANT USAGE ON SCHEMA %I TO %I", res.Schema, role},
		} {
			if err := exec(stmt[0], stmt[1:]...); err != nil {
				return fmt.Errorf("%s: %w", stmt[0], err)
			}
		}
		if err := grantReplicaTables(ctx, tx, exec, role, &res); err != nil {
			return err
		}
		names := make([]string, 0, len(settings))
		for k := range settings {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if err := exec("ALTER ROLE %I SET %I = %L", role, k, settings[k]); err != nil {
				return fmt.Errorf("set %s for %s: %w", k, role, err)
			}
		}
		return nil
	})
	return res, err
}

// auditLogTable is the append-only audit log: a replica may insert and read it, nothing more.
const auditLogTable = "audit_log"

// grantReplicaTables grants what a replica reads and writes in the schema.
func grantReplicaTables(ctx context.Context, tx pgx.Tx, exec execFunc, role string, res *ReplicaGrant) error {
	rows, err := tx.Query(ctx, `SELECT relname::text, relkind::text FROM pg_class
		WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p', 'v', 'm', 'S') ORDER BY relname`)
	if err != nil {
		return fmt.Errorf("list the schema's tables: %w", err)
	}
	type rel struct{ Name, Kind string }
	rels, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rel])
	if err != nil {
		return fmt.Errorf("list the schema's tables: %w", err)
	}
	for _, r := range rels {
		privs := "SELECT, INSERT, UPDATE, DELETE"
		switch {
		case r.Kind == "S":
			privs, res.Seqs = "USAGE, SELECT", res.Seqs+1
		case r.Kind == "v" || r.Kind == "m" || r.Name == versionTable:
			privs, res.Reads = "SELECT", res.Reads+1
		case r.Name == auditLogTable:
			// Append-only (00035_audit_log.sql): a replica writes rows, never changes one.
			privs, res.Tables = "SELECT, INSERT", res.Tables+1
			if err := exec("REVOKE UPDATE, DELETE, TRUNCATE ON TABLE %I.%I FROM %I", res.Schema, r.Name, role); err != nil {
				return fmt.Errorf("revoke on %s: %w", r.Name, err)
			}
		default:
			res.Tables++
		}
		what := "TABLE"
		if r.Kind == "S" {
			what = "SEQUENCE"
		}
		if err := exec("GRANT "+privs+" ON "+what+" %I.%I TO %I", res.Schema, r.Name, role); err != nil {
			return fmt.Errorf("grant on %s: %w", r.Name, err)
		}
	}
	if res.Tables == 0 {
		return fmt.Errorf("no cortexq tables in schema %s: run `cortexq migrate up` first", res.Schema)
	}
	return nil
}
