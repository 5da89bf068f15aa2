package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/urfave/cli/v2"
)

// flagPooler names the global flag that says what stands between cortexq and PostgreSQL.
const flagPooler = "pooler"

// Pooler modes (--pooler), as PgBouncer's pool_mode names them (docs/operations.md#poolers).
const (
	poolerNone        = "none"        // a direct connection: one server session per connection
	poolerSession     = "session"     // a session-mode pooler: the same, through it
	poolerTransaction = "transaction" // a transaction-mode pooler: a server session per transaction
)

func poolerFlag() cli.Flag {
	return &cli.StringFlag{
		Name: flagPooler,
		Usage: "what stands between cortexq and --database-url: none, session (a pooler in session mode) or " +
			"transaction (PgBouncer's pool_mode = transaction: no prepared statements are kept, and the session " +
			"settings cortexq wants must be the role's: cortexq db grant-replica sets them; docs/operations.md#poolers)",
		Value:   poolerNone,
		EnvVars: envVars("POOLER"),
	}
}

// pooler returns --pooler, checked.
func pooler(c *cli.Context) (string, error) {
	switch p := c.String(flagPooler); p {
	case poolerNone, poolerSession, poolerTransaction:
		return p, nil
	default:
		return "", usageError{fmt.Errorf("--pooler %q: want none, session or transaction", p), "cortexq"}
	}
}

// poolerTune is the last adjustment of a pool on dsn. The session settings the other tunes ask
// for (lease.TunePool, reports.TuneReportPool: RuntimeParams beyond dsn's own) never go in the
// startup packet, which PgBouncer refuses ("unsupported startup parameter"):
//
//   - directly or through a session-mode pooler, one SET per new connection sets them
//     (AfterConnect); a session-mode pooler resets them when the client leaves (DISCARD ALL);
//   - through a transaction-mode pooler, a session's SET would stay on a server connection that
//     other clients then use, so none is sent: the role's settings (ALTER ROLE ... SET, made by
//     cortexq db grant-replica) stand in, and warnSettings says which differ. Statements are
//     not prepared and kept (pgx's statement cache names them per connection, and the next
//     transaction may run on another): QueryExecModeExec sends each in one round trip.
func poolerTune(dsn, mode string, wanted *map[string]string) func(*pgxpool.Config) {
	return func(cfg *pgxpool.Config) {
		own := map[string]bool{}
		if pc, err := pgconn.ParseConfig(dsn); err == nil {
			for k := range pc.RuntimeParams {
				own[k] = true
			}
		}
		settings := map[string]string{}
		for k, v := range cfg.ConnConfig.RuntimeParams {
			if !own[k] {
				settings[k] = v
				delete(cfg.ConnConfig.RuntimeParams, k)
			}
		}
		*wanted = settings
		if mode == poolerTransaction {
			// Each statement is planned with its values anyway (an unnamed statement).
			delete(settings, "plan_cache_mode")
			execMode(cfg.ConnConfig)
			return
		}
		if len(settings) == 0 {
			return
		}
		set := setStatements(settings)
		prev := cfg.AfterConnect
		cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			if prev != nil {
				if err := prev(ctx, conn); err != nil {
					return err
				}
			}
			if _, err := conn.Exec(ctx, set); err != nil {
				return fmt.Errorf("session settings (%s): %w", set, err)
			}
			return nil
		}
	}
}

// execMode makes a connection send each statement whole (parse, bind, execute in one round
// trip) rather than prepare it under a name and keep it: the statement cache's names live in
// one server session, which a transaction-mode pooler does not keep for a client.
func execMode(cfg *pgx.ConnConfig) {
	switch cfg.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	cfg.StatementCacheCapacity, cfg.DescriptionCacheCapacity = 0, 0
}

// setStatements is one SET statement per setting, in name order, joined by semicolons (the
// simple protocol runs them in one round trip).
func setStatements(settings map[string]string) string {
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "SET %s = '%s';", pgx.Identifier{k}.Sanitize(), strings.ReplaceAll(settings[k], "'", "''"))
	}
	return b.String()
}

// warnSettings, through a transaction-mode pooler, logs each wanted setting the server's
// sessions do not have (from the role, the database or postgresql.conf), with the fix. It reads
// the values in a transaction it rolls back: SET LOCAL spells the wanted value as the server
// shows it (60s as 1min).
func warnSettings(ctx context.Context, pool *pgxpool.Pool, wanted map[string]string) {
	if len(wanted) == 0 {
		return
	}
	names := make([]string, 0, len(wanted))
	for k := range wanted {
		names = append(names, k)
	}
	sort.Strings(names)
	var role string
	var differ []string
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
			return err
		}
		for _, k := range names {
			var have, want string
			if err := tx.QueryRow(ctx, "SELECT current_setting($1)", k).Scan(&have); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, "SELECT set_config($1, $2, true)", k, wanted[k]).Scan(&want); err != nil {
				return err
			}
			if have != want {
				differ = append(differ, fmt.Sprintf("ALTER ROLE %s SET %s = '%s';", pgx.Identifier{role}.Sanitize(), k, want))
			}
		}
		return errRollback
	})
	if err != nil && !errors.Is(err, errRollback) {
		slog.Warn("could not read the session settings", "error", err)
		return
	}
	if len(differ) > 0 {
		slog.Warn("through a transaction-mode pooler cortexq cannot set its session settings, and the server's differ: "+
			"set them on the role as its owner or a superuser (docs/operations.md#poolers)",
			"role", role, "fix", strings.Join(differ, " "))
	}
}

var errRollback = errors.New("rolled back")

// openMigrationsDB opens dsn for goose and River's migrator (database/sql), with the pgx
// configuration --pooler asks for. With migrate up's --lock-timeout, each connection SETs that
// lock_timeout as it opens (docs/operations.md#online-migrations); a transaction-mode pooler
// would keep the SET on a server connection other clients then use, so none is sent through one.
func openMigrationsDB(c *cli.Context, dsn string) (*sql.DB, error) {
	mode, err := pooler(c)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	if mode == poolerTransaction {
		execMode(cfg)
	}
	lockTimeout := c.Duration("lock-timeout")
	if lockTimeout <= 0 {
		return stdlib.OpenDB(*cfg), nil
	}
	if mode == poolerTransaction {
		slog.Warn("through a transaction-mode pooler migrate up cannot set lock_timeout: its statements wait for locks as long as the role's lock_timeout says; " +
			"run migrate up on a direct connection to the server to keep the replicas from queueing behind it (docs/operations.md#online-migrations)")
		return stdlib.OpenDB(*cfg), nil
	}
	set := setStatements(map[string]string{"lock_timeout": fmt.Sprintf("%dms", max(lockTimeout.Milliseconds(), 1))})
	return stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, set); err != nil {
			return fmt.Errorf("session settings (%s): %w", set, err)
		}
		return nil
	})), nil
}

// poolerHint names the likely cause of err when it is pgx's prepared statements meeting a
// transaction-mode pooler without --pooler transaction: a statement prepared in one server
// session and looked for in another (26000), or prepared again under a name another client
// left there (42P05).
func poolerHint(err error) string {
	var pgErr *pgconn.PgError
	if (errors.As(err, &pgErr) && (pgErr.Code == "26000" || pgErr.Code == "42P05")) ||
		strings.Contains(err.Error(), `prepared statement "stmtcache_`) {
		return "a transaction-mode pooler (PgBouncer's pool_mode = transaction) in front of the database? " +
			"give --pooler transaction ($CORTEXQ_POOLER) to every command (docs/operations.md#poolers)"
	}
	return ""
}
