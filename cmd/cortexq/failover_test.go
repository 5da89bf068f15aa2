package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/queuetest"
)

// failoverPair is a primary and its streaming standby, each listening on an address of 127/8
// of its own, with the connection string naming both (target_session_attrs=read-write) of
// database db.
type failoverPair struct {
	primary, standby *queuetest.Cluster
	dsn              string
}

// newFailoverPair makes the pair: the primary takes trusted TCP connections from loopback (its
// pg_hba.conf, which the standby copies), a migrated database is made on it, then the standby
// is made and, with sync, named the primary's synchronous standby: every commit waits for its
// flush on the standby.
func newFailoverPair(t *testing.T, sync bool) failoverPair {
	t.Helper()
	h1, h2 := loopbackHost(), loopbackHost()
	primary := queuetest.NewClusterWith(t, "listen_addresses = '"+h1+"'", "synchronous_commit = on")
	hba := filepath.Join(primary.DataDir(), "pg_hba.conf")
	b, err := os.ReadFile(hba)
	require.NoError(t, err)
	writeFile(t, hba, append(b, "host all all 127.0.0.0/8 trust\n"...), true)
	ctx := context.Background()
	admin := func(c *queuetest.Cluster, stmts ...string) {
		conn, err := pgx.Connect(ctx, c.AdminDSN())
		require.NoError(t, err)
		defer conn.Close(ctx)
		for _, s := range stmts {
			_, err := conn.Exec(ctx, s)
			require.NoError(t, err, s)
		}
	}
	admin(primary, "SELECT pg_reload_conf()")
	u, err := url.Parse(primary.NewDB(t))
	require.NoError(t, err)
	db := strings.TrimPrefix(u.Path, "/")
	standby := queuetest.NewStandby(t, primary, "standby1", "listen_addresses = '"+h2+"'", "synchronous_commit = on")
	if sync {
		admin(primary, "ALTER SYSTEM SET synchronous_standby_names = 'standby1'", "SELECT pg_reload_conf()")
		waitFor(t, 30*time.Second, "the standby streams synchronously", func() bool {
			var n int
			return queryOne(ctx, primary.AdminDSN(), `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'`, &n) == nil && n == 1
		})
	}
	return failoverPair{primary: primary, standby: standby,
		dsn: fmt.Sprintf("postgres://postgres@%s:5432,%s:5432/%s?target_session_attrs=read-write&sslmode=disable&connect_timeout=3", h1, h2, db)}
}

// TestFailoverToASynchronousStandby: a primary with a synchronous standby, two replicas and a
// worker fleet on a connection string naming both hosts with target_session_attrs=read-write.
// A third of the way through, the primary dies (immediate stop) and the standby is promoted:
// the replicas find the new primary without a restart, dispatch resumes within 15 s, and every
// task ends NoProblem with exactly one accepted attempt (nothing lost, nothing recorded twice).
// The time from the promotion to the first result recorded after it is logged
// (docs/operations.md#failover).
func TestFailoverToASynchronousStandby(t *testing.T) {
	t.Parallel()
	runFailover(t, true)
}

// TestFailoverToAnAsynchronousStandbyThatLagged: the same with an asynchronous standby cut off
// from the primary (primary_conninfo emptied) a third of the way through, the primary going on
// for a few hundred more results before it dies: the promoted standby lacks every commit of
// that stretch (claims, reservations, attributions). Those tasks only run again: every task
// still ends NoProblem with exactly one accepted attempt, no invariant broken
// (docs/operations.md#failover).
func TestFailoverToAnAsynchronousStandbyThatLagged(t *testing.T) {
	t.Parallel()
	runFailover(t, false)
}

func runFailover(t *testing.T, sync bool) {
	const tasks = 3000
	pair := newFailoverPair(t, sync)
	rig := newFaultRig(t, pair.dsn)
	rig.stage("failover", "", tasks, 1024)
	for i := range 2 {
		rig.addReplica(fmt.Sprintf("f%d", i+1), "--db-outage-budget", "120s")
	}
	rig.startReplicas()
	rig.startWorkers(2, 4)
	start := time.Now()
	before := rig.waitFor("a third done", 2*time.Minute, func(p faultProgress) bool { return p.terminal >= tasks/3 }, nil)
	if !sync {
		conn, err := pgx.Connect(rig.ctx, pair.standby.AdminDSN())
		require.NoError(t, err)
		for _, s := range []string{"ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()"} {
			_, err := conn.Exec(rig.ctx, s)
			require.NoError(t, err, s)
		}
		// The reload stops the WAL receiver a moment later, not at once (and one not started
		// yet may still start with the old setting): the primary's stretch alone is counted from
		// when the standby has no receiver and its received WAL stands still for a second while
		// the primary dispatches.
		received := func() (lsn string, receivers int) {
			require.NoError(t, conn.QueryRow(rig.ctx, `SELECT coalesce(pg_last_wal_receive_lsn()::text, ''),
				(SELECT count(*) FROM pg_stat_wal_receiver)`).Scan(&lsn, &receivers))
			return lsn, receivers
		}
		require.Eventually(t, func() bool {
			was, _ := received()
			time.Sleep(time.Second)
			now, receivers := received()
			return receivers == 0 && now == was
		}, time.Minute, 100*time.Millisecond, "the standby stopped receiving WAL")
		conn.Close(rig.ctx)
		before = rig.waitFor("the primary goes on alone", time.Minute,
			func(p faultProgress) bool { return p.terminal >= before.terminal+300 }, nil)
	}
	pair.primary.Crash(t)
	crashAt := time.Now()
	pair.standby.Promote(t)
	promotedAt := time.Now()
	// The rig's own pool follows too: the first count it reads is the new primary's.
	atPromotion := rig.waitFor("the new primary answers", time.Minute, func(faultProgress) bool { return true }, nil)
	resumed := rig.waitFor("dispatch resumed within 15 s of the promotion", 15*time.Second,
		func(p faultProgress) bool { return p.terminal > atPromotion.terminal }, nil)
	resumeTook := time.Since(promotedAt)
	p := rig.waitFor("every task terminal after the failover", 3*time.Minute, allTerminal, nil)
	took := time.Since(start)
	for _, rp := range rig.replicas {
		require.True(t, rp.running(), "%s stayed up through the failover:\n%s", rp.name, faultTail(rp.log(), 3000))
	}
	p, a := rig.checkFinished()
	require.Equal(t, tasks, p.noProblem, "nothing lost: every task converted")
	require.Equal(t, float64(tasks), rig.mustScalar(`SELECT count(*) FROM attempts WHERE outcome = 'accepted'`),
		"exactly one accepted attempt per task")
	if !sync {
		require.Less(t, atPromotion.terminal, before.terminal, "the promoted standby lacks the last results")
	}
	t.Logf("failover numbers (sync %v): %d tasks, 2 replicas, 2x4 workers; primary killed with %d or more done, "+
		"standby promoted %s later with %d done (%d results lost with the primary); first result after it %s after the promotion (%d done); "+
		"all terminal after %s: %d NoProblem; %d attempts, %d leases expired, %d tasks retried",
		sync, p.total, before.terminal, promotedAt.Sub(crashAt).Round(time.Millisecond), atPromotion.terminal,
		max(0, before.terminal-atPromotion.terminal), resumeTook.Round(time.Millisecond), resumed.terminal,
		took.Round(time.Millisecond), p.noProblem, a.attempts, a.expired, a.retried)
}

// TestAConnectionToAHostTurnedReadOnlyMovesOn: a pool on two hosts with
// target_session_attrs=read-write writes to the first; the first turns read-only under its open
// connection (default_transaction_read_only, as a demotion leaves a server): the write that meets
// it fails (SQLSTATE 25006) and its connection is dropped, so the next write goes to the host
// that writes, without a restart. Without dropOnReadOnly the pool would keep the read-only
// connection and fail every write.
func TestAConnectionToAHostTurnedReadOnlyMovesOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var hosts []string
	var clusters []*queuetest.Cluster
	for range 2 {
		h := loopbackHost()
		c := queuetest.NewClusterWith(t, "listen_addresses = '"+h+"'")
		hba := filepath.Join(c.DataDir(), "pg_hba.conf")
		b, err := os.ReadFile(hba)
		require.NoError(t, err)
		writeFile(t, hba, append(b, "host all all 127.0.0.0/8 trust\n"...), true)
		conn, err := pgx.Connect(ctx, c.AdminDSN())
		require.NoError(t, err)
		for _, s := range []string{"SELECT pg_reload_conf()", "CREATE TABLE notes (host text)"} {
			_, err := conn.Exec(ctx, s)
			require.NoError(t, err, s)
		}
		conn.Close(ctx)
		hosts, clusters = append(hosts, h), append(clusters, c)
	}
	pool, err := connectDSN(ctx, fmt.Sprintf("postgres://postgres@%s:5432,%s:5432/postgres?target_session_attrs=read-write&sslmode=disable",
		hosts[0], hosts[1]), dropOnReadOnly, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	require.NoError(t, err)
	defer pool.Close()
	write := func() (string, error) {
		var host string
		err := pool.QueryRow(ctx, "INSERT INTO notes VALUES (host(inet_server_addr())) RETURNING host").Scan(&host)
		return host, err
	}
	host, err := write()
	require.NoError(t, err)
	require.Equal(t, hosts[0], host)
	conn, err := pgx.Connect(ctx, clusters[0].AdminDSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, s := range []string{"ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()"} {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	waitFor(t, 10*time.Second, "the first host turns read-only", func() bool {
		_, err := write()
		return err != nil
	})
	host, err = write()
	require.NoError(t, err, "the next write finds the host that writes")
	require.Equal(t, hosts[1], host)
}
