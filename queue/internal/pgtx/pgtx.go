// Package pgtx holds what every package that talks to PostgreSQL shares: the one translation of
// PostgreSQL errors into cortexq's (queue.ErrNotFound, queue.ErrDuplicate), and transactions
// that read the lease clock at their start and are retried after a deadlock or a serialization
// failure.
package pgtx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// maxTries bounds how often a retried transaction runs.
const maxTries = 5

// Wrap names what failed, and turns pgx.ErrNoRows into queue.ErrNotFound and a unique
// violation into queue.ErrDuplicate (with PostgreSQL's detail). It returns nil for nil.
func Wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, queue.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%s: %w: %s", what, queue.ErrDuplicate, pgErr.Detail)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Retryable reports a deadlock or a serialization failure: the transaction may run again.
func Retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// Options describe a transaction.
type Options struct {
	// What names it in errors and logs.
	What string
	// Now, when set, is its clock instead of the database's (a test's injected clock).
	Now *time.Time
	// Retry runs it again (up to 5 times in all) after a deadlock or a serialization failure;
	// OnRetry, if set, hears of each new try.
	Retry   bool
	OnRetry func(attempt int, err error)
}

// Retrying runs tx as o says, and returns its error wrapped (Wrap).
func Retrying(o Options, tx func() error) error {
	for attempt := 1; ; attempt++ {
		err := tx()
		if err == nil {
			return nil
		}
		if o.Retry && attempt < maxTries && Retryable(err) {
			if o.OnRetry != nil {
				o.OnRetry(attempt, err)
			}
			continue
		}
		return Wrap(o.What, err)
	}
}

// Func is the body of a transaction: its queries, the transaction, and the clock read at its
// start.
type Func func(q *dbsqlc.Queries, tx pgx.Tx, now time.Time) error

// Run runs fn in a transaction on db, with the clock read at its start, as o says.
func Run(ctx context.Context, db Beginner, o Options, fn Func) error {
	return Retrying(o, func() error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			q := dbsqlc.New(tx)
			now, err := q.ClockNow(ctx, o.Now)
			if err != nil {
				return err
			}
			return fn(q, tx, now)
		})
	})
}

// Beginner starts transactions: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}
