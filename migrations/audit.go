package migrations

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AuditGrant is what GrantAudit did.
type AuditGrant struct {
	Created, Login bool
	Tables, Views  int
	Schema         string
	Loose          []string // what the role may still do that an audit role should not
}

// writeFuncs are the functions that create large objects, which outlive the session that made
// them: an audit session with its read-only default turned off could fill the disk with them.
const writeFuncs = "lo_creat(integer), lo_create(oid), lo_from_bytea(oid, bytea)"

// GrantAudit makes role a read-only audit role of the database pool is on, in one transaction:
// SELECT on the audit_* views and on what the schema lists in audit_readable
// (00018_audit_readable.sql), read-only sessions, and no privilege to write (docs/security.md).
// A missing role is created, LOGIN when login is set; password, if not empty, is sent hashed
// (CheckPassword first).
func GrantAudit(ctx context.Context, pool *pgxpool.Pool, role string, login bool, password string) (AuditGrant, error) {
	var res AuditGrant
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
		if err := auditRole(ctx, tx, exec, role, login, password, "an audit role", &res); err != nil {
			return err
		}
		if err := readOnlyByPrivileges(ctx, tx, exec, role, &res); err != nil {
			return err
		}
		return grantReads(ctx, tx, exec, role, &res)
	})
	return res, err
}

type execFunc func(format string, args ...string) error

// auditRole makes (or checks) role, its login and password, and refuses a role that may do
// more than an audit role.
func auditRole(ctx context.Context, tx pgx.Tx, exec execFunc, role string, login bool, password, kind string, res *AuditGrant) error {
	var super, createRole, createDB, bypass, canLogin bool
	err := tx.QueryRow(ctx, `SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = $1`, role).
		Scan(&super, &createRole, &createDB, &bypass, &canLogin)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		res.Created = true
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
		return fmt.Errorf("role %s is a superuser or may create roles or databases or bypass row security: not %s", role, kind)
	case login && !canLogin:
		if err := exec("ALTER ROLE %I LOGIN", role); err != nil {
			return fmt.Errorf("alter role %s: %w", role, err)
		}
		canLogin = true
	}
	res.Login = canLogin
	if password != "" {
		verifier, err := scramVerifier(password)
		if err != nil {
			return err
		}
		// The verifier, not the password: statements may be logged (log_statement = ddl).
		if err := exec("ALTER ROLE %I PASSWORD %L", role, verifier); err != nil {
			return fmt.Errorf("set the password of %s: %w", role, err)
		}
	}
	return nil
}

// readOnlyByPrivileges makes role's sessions read-only, lets it connect and use the schema, and
// revokes what would let it write anyway; Loose says what could not be revoked.
func readOnlyByPrivileges(ctx context.Context, tx pgx.Tx, exec execFunc, role string, res *AuditGrant) error {
	if err := exec("ALTER ROLE %I SET default_transaction_read_only = on", role); err != nil {
		return fmt.Errorf("make %s read-only: %w", role, err)
	}
	var db string
	if err := tx.QueryRow(ctx, "SELECT current_database(), current_schema()").Scan(&db, &res.Schema); err != nil {
		return err
	}
	if err := exec("GRANT CONNECT ON DATABASE %I TO %I", db, role); err != nil {
		return fmt.Errorf("grant connect: %w", err)
	}
	if err := exec("GRANT USAGE ON SCHEMA %I TO %I", res.Schema, role); err != nil {
		return fmt.Errorf("grant schema usage: %w", err)
	}
	// Read-only by privileges, not only by the session default, which a session may turn
	// off. TEMPORARY and these functions are PUBLIC's by default: revoked from PUBLIC, the
	// database owner and superusers keep them. A role that may not revoke them leaves them
	// (checked below).
	revoke := func(stmt string) error {
		sp, err := tx.Begin(ctx) // a savepoint: a refusal must not end the transaction
		if err != nil {
			return err
		}
		if _, err := sp.Exec(ctx, stmt); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "42501" {
				return sp.Rollback(ctx)
			}
			return err
		}
		return sp.Commit(ctx)
	}
	for _, stmt := range []string{
		"REVOKE TEMPORARY ON DATABASE " + pgx.Identifier{db}.Sanitize() + " FROM PUBLIC, " + pgx.Identifier{role}.Sanitize(),
		"REVOKE EXECUTE ON FUNCTION " + writeFuncs + " FROM PUBLIC",
	} {
		if err := revoke(stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	var temp, lo bool
	if err := tx.QueryRow(ctx, `SELECT has_database_privilege($1, current_database(), 'TEMPORARY'),
		has_function_privilege($1, 'lo_create(oid)', 'EXECUTE')`, role).Scan(&temp, &lo); err != nil {
		return fmt.Errorf("check privileges of %s: %w", role, err)
	}
	if temp {
		res.Loose = append(res.Loose, "temporary tables")
	}
	if lo {
		res.Loose = append(res.Loose, "large objects")
	}
	return nil
}

// grantReads grants SELECT on the audit_* views and on what audit_readable lists.
func grantReads(ctx context.Context, tx pgx.Tx, exec execFunc, role string, res *AuditGrant) error {
	// What the audit role may read is declared beside the schema (audit_readable, which the
	// migration creating a table or view fills in); audit_* views are its too.
	var readable []string
	if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(name), '{}') FROM audit_readable`).Scan(&readable); err != nil {
		return fmt.Errorf("list what an audit role reads (run `cortexq migrate up` first): %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT table_name::text, table_type = 'VIEW' FROM information_schema.tables
		WHERE table_schema = current_schema() AND (table_name = ANY($1) OR (table_type = 'VIEW' AND table_name LIKE 'audit\_%'))
		ORDER BY table_name`, readable)
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
		if err := exec("GRANT SELECT ON %I.%I TO %I", res.Schema, r.Name, role); err != nil {
			return fmt.Errorf("grant select on %s: %w", r.Name, err)
		}
		if r.View && !slices.Contains(readable, r.Name) {
			res.Views++
		} else {
			res.Tables++
		}
	}
	if res.Tables < len(readable) {
		return fmt.Errorf("only %d of the %d cortexq tables of audit_readable found in schema %s: run `cortexq migrate up` first", res.Tables, len(readable), res.Schema)
	}
	return nil

}

// CheckPassword refuses a password that scramVerifier would hash differently from PostgreSQL:
// PostgreSQL normalises (SASLprep) a password that is not plain ASCII.
func CheckPassword(password string) error {
	for _, r := range password {
		if r < 0x20 || r > 0x7e {
			return errors.New("printable ASCII only (it is hashed here, and PostgreSQL normalises other characters)")
		}
	}
	return nil
}

// scramVerifier is what PostgreSQL stores for a SCRAM-SHA-256 password (RFC 5802 and 7677, as
// PostgreSQL's own clients compute it): sending it instead of the password keeps the password
// out of the server's logs and of pg_stat_activity.
func scramVerifier(password string) (string, error) {
	const iterations = 4096
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key"))), nil
}
