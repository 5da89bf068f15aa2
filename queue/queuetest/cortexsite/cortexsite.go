// Package cortexsite builds a CorTeX site's database for the tests of cortexq's import from
// CorTeX: the final shape of CorTeX's schema (schema.sql) with rows of every kind an import
// reads (data.sql), on the tests' cluster, and a role that may only read it.
package cortexsite

import (
	"context"
	_ "embed"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue/queuetest"
)

//go:embed schema.sql
var schema string

//go:embed data.sql
var data string

var roles atomic.Int64

// Site is a CorTeX database made for one test.
type Site struct {
	// DSN connects as the owner (for the test's own checks and changes).
	DSN string
	// ReaderDSN connects as a role with SELECT on the tables and nothing else.
	ReaderDSN string
	// Root is the directory in the corpora's paths and entries.
	Root string
}

// New makes a CorTeX database on the tests' shared cluster, with the rows of data.sql for
// corpora beneath root (files are the test's business).
func New(t testing.TB, root string) *Site {
	t.Helper()
	ctx := context.Background()
	role := fmt.Sprintf("cortex_reader_%d_%d", os.Getpid(), roles.Add(1))
	ident := pgx.Identifier{role}.Sanitize()
	// Registered first, run last: once the database (and the role's grants in it) is gone.
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), queuetest.Shared(t).AdminDSN())
		if err != nil {
			return // the cluster is gone, and the role with it
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+ident)
	})
	dsn := queuetest.Shared(t).NewBlankDB(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("cortexsite: %v", err)
	}
	defer conn.Close(ctx)
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatalf("cortexsite: %v", err)
	}
	ddl := schema
	if version < 180000 { // uuidv7() is PostgreSQL 18's
		ddl = strings.ReplaceAll(ddl, "uuidv7()", "gen_random_uuid()")
	}
	if _, err := conn.Exec(ctx, ddl); err != nil {
		t.Fatalf("cortexsite: schema: %v", err)
	}
	if _, err := conn.Exec(ctx, strings.ReplaceAll(data, "@ROOT@", root)); err != nil {
		t.Fatalf("cortexsite: data: %v", err)
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatalf("cortexsite: %v", err)
	}
	for _, stmt := range []string{
		"DROP ROLE IF EXISTS " + ident,
		"CREATE ROLE " + ident + " LOGIN",
		"GRANT CONNECT ON DATABASE " + pgx.Identifier{db}.Sanitize() + " TO " + ident,
		"GRANT USAGE ON SCHEMA public TO " + ident,
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + ident,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("cortexsite: %s: %v", stmt, err)
		}
	}
	return &Site{DSN: dsn, ReaderDSN: withUser(dsn, role), Root: root}
}

// withUser is dsn connecting as user.
func withUser(dsn, user string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.User = url.User(user)
		return u.String()
	}
	return dsn + " user=" + user // a later keyword wins
}
