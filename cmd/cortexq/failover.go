package main

import (
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dropOnReadOnly closes a connection that meets a read-only server (SQLSTATE 25006,
// read_only_sql_transaction: a primary demoted to a standby, or made read-only, under a
// connection that stays open), as well as on FATAL errors as pgx does: the pool then opens a new
// one, which a connection string naming several hosts with target_session_attrs=read-write
// takes to the host that now writes (docs/operations.md#failover).
func dropOnReadOnly(cfg *pgxpool.Config) {
	cfg.ConnConfig.OnPgError = func(_ *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		return !strings.EqualFold(pgErr.Severity, "FATAL") && pgErr.Code != "25006"
	}
}
