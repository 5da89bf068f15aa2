package reaper

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/leasetest"
)

func TestMain(m *testing.M) {
	queuetest.Main(m)
}

// expiredLeases leases n tasks and returns a store whose clock is past their leases.
func expiredLeases(t *testing.T, pool *pgxpool.Pool, n int) func() time.Time {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO corpora (name) VALUES ('c');
		INSERT INTO services (name) VALUES ('echo')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO tasks (service_id, corpus_id, entry)
		SELECT 1, 1, '/c/' || i || '/source.zip' FROM generate_series(1, $1) AS i`, n)
	require.NoError(t, err)
	store := lease.New(pool, lease.Config{Replica: "leaser", LeaseTimeout: time.Minute})
	workers := make([]string, n)
	for i := range workers {
		workers[i] = "w" + string(rune('a'+i%26)) + time.Duration(i).String()
	}
	leases, err := leasetest.Lease(ctx, store, leasetest.Request{ServiceID: 1, Workers: workers})
	require.NoError(t, err)
	require.Len(t, leases, n)
	later := time.Now().Add(time.Hour)
	return func() time.Time { return later }
}

func TestReaper(t *testing.T) {
	t.Run("TwoReapersAtOnceRequeueEachLeaseOnce", func(t *testing.T) {
		t.Parallel()
		pool := queuetest.NewPool(t)
		now := expiredLeases(t, pool, 2000)
		ctx := context.Background()
		var wg sync.WaitGroup
		sums := make([]lease.ReapSummary, 2)
		for i := range sums {
			other, err := pgxpool.New(ctx, pool.Config().ConnString())
			require.NoError(t, err)
			defer other.Close()
			store := lease.New(other, lease.Config{Replica: "reaper", NowFunc: now})
			wg.Go(func() {
				for {
					s, err := store.Reap(ctx, 100)
					require.NoError(t, err)
					if s.Requeued == 0 {
						return
					}
					sums[i].Requeued += s.Requeued
				}
			})
		}
		wg.Wait()
		require.Equal(t, 2000, sums[0].Requeued+sums[1].Requeued, "every lease requeued exactly once")
		var once int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM dispatch WHERE queued AND retries = 1`).Scan(&once))
		require.Equal(t, 2000, once)
	})

	t.Run("LeaderReapsPeriodicallyAndRecordsPasses", func(t *testing.T) {
		t.Parallel()
		pool := queuetest.NewPool(t)
		now := expiredLeases(t, pool, 10)
		ctx := context.Background()
		var mu sync.Mutex
		var total lease.ReapSummary
		var clients []func()
		for _, replica := range []string{"a", "b"} {
			b := base.New(pool, now, nil)
			client, err := New(b.Pool, b.Lease(lease.Config{Replica: replica}), b.Reports, Config{Interval: 200 * time.Millisecond, OnPass: func(s lease.ReapSummary) {
				mu.Lock()
				total.Requeued += s.Requeued
				mu.Unlock()
			}})
			require.NoError(t, err)
			require.NoError(t, client.Start(ctx))
			clients = append(clients, func() {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				require.NoError(t, client.Stop(sctx))
			})
		}
		defer func() {
			for _, stop := range clients {
				stop()
			}
		}()
		require.Eventually(t, func() bool {
			var n int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM dispatch WHERE queued`).Scan(&n))
			return n == 10
		}, 30*time.Second, 100*time.Millisecond, "the leader's periodic pass requeued the expired leases")
		require.Eventually(t, func() bool {
			var n, requeued int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(requeued), 0) FROM reaper_passes`).Scan(&n, &requeued))
			return n >= 2 && requeued == 10
		}, 30*time.Second, 100*time.Millisecond, "each pass is recorded for psql")
		mu.Lock()
		require.Equal(t, 10, total.Requeued)
		mu.Unlock()
	})
}

func TestNotificationsOfOtherSessionsDoNotPauseTheReaper(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	ctx := context.Background()
	passes := make(chan struct{}, 100)
	b := base.New(pool, nil, nil)
	client, err := New(b.Pool, b.Lease(lease.Config{Replica: "a"}), b.Reports, Config{Interval: 200 * time.Millisecond, OnPass: func(lease.ReapSummary) {
		select {
		case passes <- struct{}{}:
		default:
		}
	}})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(sctx))
	}()
	select {
	case <-passes:
	case <-time.After(30 * time.Second):
		t.Fatal("no first reaper pass within 30 s")
	}
	// Any session may notify: what River's own pause would send, for every queue and for its own.
	for _, queue := range []string{"*", "default"} {
		_, err := pool.Exec(ctx, `SELECT pg_notify(current_schema() || '.river_control', $1)`,
			`{"action":"pause","queue":"`+queue+`"}`)
		require.NoError(t, err)
	}
	time.Sleep(time.Second) // a notification, if listened to, is applied by now
	for len(passes) > 0 {
		<-passes
	}
	for i := range 3 {
		select {
		case <-passes:
		case <-time.After(10 * time.Second):
			t.Fatalf("the reaper stopped after a notification of another session (%d passes after it)", i)
		}
	}
}

func TestFallback(t *testing.T) {
	t.Run("ReapsWhenNoPassIsRecordedLately", func(t *testing.T) {
		t.Parallel()
		pool := queuetest.NewPool(t)
		now := expiredLeases(t, pool, 5)
		ctx := context.Background()
		b := base.New(pool, now, nil)
		store := b.Lease(lease.Config{Replica: "standby"})
		interval := time.Second
		require.False(t, fallbackOnce(ctx, b.Inspect, store, interval, 0, nil, nil), "just started: the leader gets its chance")
		_, err := pool.Exec(ctx, `INSERT INTO reaper_passes (replica, at, requeued, dead_lettered, forgotten) VALUES ('gone', now() - interval '1 day', 0, 0, 0)`)
		require.NoError(t, err)
		require.False(t, fallbackOnce(ctx, b.Inspect, store, interval, 0, nil, nil), "just started, even after a long silence")
		require.True(t, fallbackOnce(ctx, b.Inspect, store, interval, time.Hour, nil, nil), "no pass ever, up for long: reap")
		var queued int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM dispatch WHERE queued`).Scan(&queued))
		require.Equal(t, 5, queued)
		require.False(t, fallbackOnce(ctx, b.Inspect, store, interval, time.Hour, nil, nil), "a pass was just recorded: the leader's job")
		_, err = pool.Exec(ctx, `UPDATE reaper_passes SET at = at - interval '1 hour'`)
		require.NoError(t, err)
		require.True(t, fallbackOnce(ctx, b.Inspect, store, interval, time.Hour, nil, nil), "the last pass is stale: reap")
	})
}

func TestRiversRoutineCountsLogAtDebug(t *testing.T) {
	var buf bytes.Buffer
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		buf.Reset()
		l := slog.New(routineDebug{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})})
		l.Info("producer: Producer job counts", "num_completed_jobs", 3)
		l.Info("elector: Gained leadership")
		out := buf.String()
		require.Contains(t, out, "level=INFO msg=\"elector: Gained leadership\"")
		if level == slog.LevelInfo {
			require.NotContains(t, out, "Producer job counts", "routine counts are not logged at info")
		} else {
			require.Contains(t, out, "level=DEBUG msg=\"producer: Producer job counts\" num_completed_jobs=3")
		}
	}
}
