package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// A claim's failure counts as rolled back (its archives are put back) only when the server said
// so and kept the session: an ERROR aborts the transaction, but a FATAL ends the session and
// may follow a commit that was written (a fast shutdown can answer a COMMIT so), and a lost
// connection says nothing.
func TestRolledBackOnlyWhenTheServerSaidSo(t *testing.T) {
	ctx := context.Background()
	dsn := queuetest.NewDB(t)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT 1/0")
	require.Error(t, err)
	require.True(t, lease.RolledBack(fmt.Errorf("claim: %w", err)), "an ERROR aborts the transaction: %v", err)

	victim, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer victim.Close(ctx)
	var pid int
	require.NoError(t, victim.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	// The victim waits in a statement when it is terminated, so the FATAL is the answer it
	// reads (a statement sent after the termination may fail to write instead).
	done := make(chan error, 1)
	go func() {
		_, err := victim.Exec(ctx, "SELECT pg_sleep(60)")
		done <- err
	}()
	for range 600 { // bounded: 60 s
		var waiting bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE pid = $1 AND state = 'active' AND query LIKE '%pg_sleep%')`, pid).Scan(&waiting))
		if waiting {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err = conn.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	err = <-done
	require.Error(t, err)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "the server ends the session with FATAL")
	require.Equal(t, "57P01", pgErr.Code, err)
	require.False(t, lease.RolledBack(fmt.Errorf("claim: %w", err)), "a FATAL leaves the outcome unknown: %v", err)

	require.False(t, lease.RolledBack(errors.New("read tcp: connection reset by peer")))
	require.True(t, lease.RolledBack(pgx.ErrTxCommitRollback))
}
