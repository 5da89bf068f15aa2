package replica

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
)

type noopArgs struct{}

func (noopArgs) Kind() string { return "cortexq_test_noop" }

type noopWorker struct{ river.WorkerDefaults[noopArgs] }

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// unreachablePool is a pool on a loopback port nothing listens on.
func unreachablePool(t *testing.T) *pgxpool.Pool {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@"+addr+"/none?sslmode=disable&connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// A River client that cannot reach the database at the replica's start does not stop the
// replica: the start succeeds, says so, and tries again in the background until stopped. Another
// error (a client that cannot work at all) is the start's.
func TestRiverStartWithoutTheDatabaseRetriesInTheBackground(t *testing.T) {
	t.Parallel()
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(unreachablePool(t)), &river.Config{
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}}, Workers: workers})
	require.NoError(t, err)
	var logs bytes.Buffer
	s := &riverService{client: client, logger: slog.New(slog.NewTextHandler(&logs, nil))}
	require.NoError(t, s.Start(context.Background()))
	require.Contains(t, logs.String(), "serving without it")
	require.NotNil(t, s.retrying)
	time.Sleep(2 * riverRetryInterval) // a retry or two, which fail as the first did
	s.Stop()
	select {
	case <-s.retrying:
	default:
		t.Fatal("the retries outlived the stop")
	}

	bare, err := river.NewClient(riverpgxv5.New(unreachablePool(t)), &river.Config{})
	require.NoError(t, err)
	s = &riverService{client: bare}
	require.ErrorContains(t, s.Start(context.Background()), "start the reaper")
	s.Stop()
}
