package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// The hot transactions (lease, claim) run in two round trips instead of one per statement:
//
//  1. BEGIN, the clock and the locking reads, sent together (a pgx batch);
//  2. after the decisions are made in Go, the one write statement (Apply) and COMMIT, together.
//
// The typed queries stay sqlc's: each read is run twice through the same generated method, once
// against a recorder that queues its SQL and arguments into the batch, and once, after the batch
// was sent, against a reader that hands it the batch's next result to scan. The write is queued
// once (writes.flush, against the recorder); its answer is only its error.
// A transaction's round trips are what a lease waits on while the worker waits for its task.

// txMode says how pipelinedTx runs a transaction.
type txMode struct {
	// retry runs the whole transaction again after a deadlock or serialization failure.
	retry bool
	// generic runs each statement of the transaction with its generic plan (forceGeneric), for
	// statements whose plan cannot go wrong with the table sizes: Apply and the claim's reads.
	generic bool
}

// forceGeneric tells PostgreSQL to run each statement of the current transaction with its
// generic plan, made once per connection, instead of planning it afresh at (nearly) every call.
// set_config rather than SET LOCAL, so it also runs in a batch's implicit transaction
// (genericPlan). See docs/performance.md#plan-cache.
const forceGeneric = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"

// pipelinedTx runs one transaction as two batches, in three steps with values passed along:
// read queues the locking reads through q and returns what they read; decide, given the
// transaction's clock and what was read, makes the decisions and returns the writes (nil to
// write nothing); the writes and COMMIT then go together. read is called twice, first against a
// recorder that only queues its statements (what it returns then is dropped), then against the
// batch's answers, so it must do nothing but read. A read decide cannot do without goes through
// its q, in the transaction, one round trip each. Errors leave nothing behind: the transaction
// is rolled back (or its connection dropped). The claim takes the same steps apart
// (Store.BeginClaim, Claim.Commit), with the caller's own between them.
func pipelinedTx[R any](ctx context.Context, s *Store, what string, mode txMode,
	read func(ctx context.Context, q *dbsqlc.Queries) (R, error),
	decide func(now time.Time, got R, q *dbsqlc.Queries) (*writes, error)) error {
	return s.retrying(what, mode.retry, func() error {
		tx, got, err := beginPipelined(ctx, s, mode, read)
		if err != nil {
			return err
		}
		w, err := decide(tx.now, got, dbsqlc.New(tx.conn))
		if err != nil {
			tx.rollback(ctx)
			return err
		}
		return tx.commit(ctx, w)
	})
}

// pipelined is one try of a pipelined transaction between its round trips, on a connection of
// its own: round trip 1 answered, the transaction open until commit or rollback ends it.
type pipelined struct {
	s    *Store
	conn *pgxpool.Conn // nil once the transaction ended
	// now is the transaction's clock; reads how long round trip 1 took, from its batch sent to
	// its answers read; commitTook how long round trip 2 took, once it committed.
	now               time.Time
	reads, commitTook time.Duration
}

// beginPipelined sends round trip 1 (BEGIN, the clock and read's reads) on a connection of its
// own and returns the open transaction with what read read. An error ends the transaction.
func beginPipelined[R any](ctx context.Context, s *Store, mode txMode,
	read func(ctx context.Context, q *dbsqlc.Queries) (R, error)) (*pipelined, R, error) {
	var got R
	batch, err := s.readBatch(ctx, mode, func(q *dbsqlc.Queries) error {
		_, err := read(ctx, q)
		return err
	})
	if err != nil {
		return nil, got, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, got, err
	}
	tx := &pipelined{s: s, conn: conn}
	sent := time.Now()
	if tx.now, got, err = readResults(ctx, s, conn.SendBatch(ctx, batch), mode, read); err != nil {
		tx.rollback(ctx)
		return nil, got, err
	}
	tx.reads = time.Since(sent)
	return tx, got, nil
}

// errTxEnded is a step of a pipelined transaction taken after it ended.
var errTxEnded = errors.New("the transaction has ended")

// commit sends round trip 2, w's writes (nil: none) and COMMIT (after one more round trip, only
// for message kinds this replica has not seen committed), and ends the transaction either way.
func (tx *pipelined) commit(ctx context.Context, w *writes) error {
	if tx.conn == nil {
		return errTxEnded
	}
	batch, err := tx.s.writeBatch(ctx, tx.conn, w, tx.now)
	if err != nil {
		tx.rollback(ctx)
		return err
	}
	sent := time.Now()
	if err := tx.s.commitResults(tx.conn.SendBatch(ctx, batch), w); err != nil {
		tx.rollback(ctx)
		return err
	}
	tx.commitTook = time.Since(sent)
	tx.conn.Release()
	tx.conn = nil
	return nil
}

// rollback ends the transaction, if it has not ended, and gives its connection back. A
// connection whose ROLLBACK fails is closed: left inside a transaction, it is not idle, and the
// pool closes it on release rather than reuse it, which ends the transaction too.
func (tx *pipelined) rollback(ctx context.Context) {
	if tx.conn == nil {
		return
	}
	if !tx.conn.Conn().IsClosed() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := tx.conn.Exec(rctx, "ROLLBACK"); err != nil {
			_ = tx.conn.Conn().Close(rctx)
		}
	}
	tx.conn.Release()
	tx.conn = nil
}

// readBatch queues round trip 1: BEGIN, the plan mode, the transaction's clock and the reads.
func (s *Store) readBatch(ctx context.Context, mode txMode, reads func(q *dbsqlc.Queries) error) (*pgx.Batch, error) {
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	if mode.generic {
		batch.Queue(forceGeneric)
	}
	rec := dbsqlc.New(recorder{batch})
	_, _ = rec.ClockNow(ctx, s.injectedNow())
	if err := reads(rec); err != nil {
		return nil, err
	}
	return batch, nil
}

// readResults reads round trip 1's answers in the order readBatch queued them: the clock and
// what read reads. It closes br.
func readResults[R any](ctx context.Context, s *Store, br pgx.BatchResults, mode txMode,
	read func(ctx context.Context, q *dbsqlc.Queries) (R, error)) (now time.Time, got R, err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := br.Exec(); err != nil {
		return now, got, err
	}
	if mode.generic {
		if _, err := br.Exec(); err != nil {
			return now, got, err
		}
	}
	q := dbsqlc.New(reader{br})
	if now, err = q.ClockNow(ctx, s.injectedNow()); err != nil {
		return now, got, err
	}
	got, err = read(ctx, q)
	return now, got, err
}

// writeBatch queues round trip 2: w's writes (nil writes nothing) and COMMIT. Message kinds this
// replica has not seen committed are resolved first, in one more round trip.
func (s *Store) writeBatch(ctx context.Context, conn *pgxpool.Conn, w *writes, now time.Time) (*pgx.Batch, error) {
	batch := &pgx.Batch{}
	if w != nil {
		if err := s.resolveKinds(ctx, dbsqlc.New(conn), w); err != nil {
			return nil, err
		}
		if err := w.flush(ctx, dbsqlc.New(recorder{batch}), now, s.cfg.Replica); err != nil {
			return nil, err
		}
	}
	batch.Queue("COMMIT")
	return batch, nil
}

// commitResults reads round trip 2's answers, checks that the transaction committed, and closes br.
func (s *Store) commitResults(br pgx.BatchResults, w *writes) (err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if w != nil {
		// The answer of the one write statement writeBatch queued (writes.flush: Apply).
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("write changes: %w", err)
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return err
	}
	if tag.String() != "COMMIT" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// recorder is a dbsqlc.DBTX that queues each statement into a batch instead of running it; the
// results it returns are empty.
type recorder struct{ b *pgx.Batch }

func (r recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (r recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.b.Queue(sql, args...)
	return noRows{}, nil
}

func (r recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.b.Queue(sql, args...)
	return noRow{}
}

// errRecorded is what a recorded single-row query scans to: it has not run yet.
var errRecorded = errors.New("lease: statement queued, not run")

type noRow struct{}

func (noRow) Scan(...any) error { return errRecorded }

type noRows struct{}

func (noRows) Close()                                       {}
func (noRows) Err() error                                   { return nil }
func (noRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (noRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (noRows) Next() bool                                   { return false }
func (noRows) Scan(...any) error                            { return errRecorded }
func (noRows) Values() ([]any, error)                       { return nil, errRecorded }
func (noRows) RawValues() [][]byte                          { return nil }
func (noRows) Conn() *pgx.Conn                              { return nil }
func (noRows) TypeMap() *pgtype.Map                         { return nil }

// reader is a dbsqlc.DBTX that answers each statement with the next result of a sent batch, in
// the order the recorder queued them.
type reader struct{ br pgx.BatchResults }

func (r reader) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return r.br.Exec()
}

func (r reader) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return r.br.Query()
}

func (r reader) QueryRow(context.Context, string, ...any) pgx.Row {
	return r.br.QueryRow()
}

// genericPlan runs the statements run issues through q in one round trip, as one implicit
// transaction (a batch ends in a single Sync; no BEGIN and COMMIT), each with its generic plan
// (forceGeneric): for the fast reservation, whose statement costs about as much to plan as to
// run (docs/performance.md#plan-cache). run is called twice, as reads are in pipelinedTx, so it
// must only assign what it reads.
func (s *Store) genericPlan(ctx context.Context, run func(q *dbsqlc.Queries) error) error {
	return s.genericPlanWith(ctx, forceGeneric, run)
}

// asyncCommit is forceGeneric that also commits without waiting for the WAL flush
// (synchronous_commit off, for the transaction only): for the attribution, whose loss in a
// database crash is the crash window (docs/performance.md#asynchronous-commit-of-attributions).
const asyncCommit = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('synchronous_commit', 'off', true)"

// genericPlanWith is genericPlan with setup, a statement that sets the transaction's settings.
func (s *Store) genericPlanWith(ctx context.Context, setup string, run func(q *dbsqlc.Queries) error) error {
	batch := &pgx.Batch{}
	batch.Queue(setup)
	if err := run(dbsqlc.New(recorder{batch})); err != nil {
		return err
	}
	br := s.pool.SendBatch(ctx, batch)
	err := func() error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		return run(dbsqlc.New(reader{br}))
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// lockedTasks is what a transaction that decides on tasks reads first, locked: the tasks, then
// their dispatch rows (every run's kept row).
type lockedTasks struct {
	tasks []dbsqlc.TaskLockForClaimRow
	rows  []dbsqlc.Dispatch
}

// lockTasks is the reads of a transaction that decides on ids (beginPipelined's read): their
// tasks and dispatch rows, locked in that order.
func lockTasks(ids []int64) func(ctx context.Context, q *dbsqlc.Queries) (lockedTasks, error) {
	return func(ctx context.Context, q *dbsqlc.Queries) (lockedTasks, error) {
		var got lockedTasks
		var err error
		if got.tasks, err = q.TaskLockForClaim(ctx, ids); err != nil {
			return got, fmt.Errorf("lock tasks: %w", err)
		}
		if got.rows, err = q.DispatchLockForTasks(ctx, ids); err != nil {
			return got, fmt.Errorf("lock dispatch rows: %w", err)
		}
		return got, nil
	}
}
