package dispatch

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	zmq "github.com/pebbe/zmq4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// freeLoopbackPort returns a loopback TCP port free now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newProxiedEnv is newEnv on a cluster of its own that the server reaches through toxiproxy
// (in this process); the test's checks go to the database directly.
func newProxiedEnv(t *testing.T, opts ...envOption) (*env, *toxiproxy.Proxy) {
	t.Helper()
	cluster := queuetest.NewTCPCluster(t, freeLoopbackPort(t))
	dsn := cluster.NewDB(t)
	zerolog.SetGlobalLevel(zerolog.ErrorLevel)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(srv, "db", "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", cluster.Port()))
	require.NoError(t, srv.Collection.Add(proxy, true))
	t.Cleanup(proxy.Stop)
	ctx := context.Background()
	open := func(dsn string) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(dsn)
		require.NoError(t, err)
		base.TuneNetwork(cfg)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pool
	}
	direct := open(dsn)
	proxied := open(queuetest.TCPDSN(proxy.Listen, queuetest.DBName(t, dsn)))
	return newEnvWith(t, proxied, direct, opts...), proxy
}

// TestOutageHoldsResultsAndClaimsThemOnceBack cuts the database link while two tasks are out:
// the replica notices, holds the one result its bound allows and refuses the other; once the
// link is back the held result is claimed, once, and the refused task is still in flight for
// its lease to expire. A second copy of the held result is not recorded again. Which of the two
// is held is the sink's choice (its writers place results in parallel): the test asks it.
func TestOutageHoldsResultsAndClaimsThemOnceBack(t *testing.T) {
	t.Parallel()
	e, proxy := newProxiedEnv(t, func(_ *lease.Config, c *Config) { c.OutageHeldResults = 1 })
	ids := e.stage(2, 1000)
	p := newRawPeer(t, e, "w1")
	var leased []int64
	payloads := map[int64][]byte{}
	for range ids {
		id, payload := p.lease(e.svcName)
		require.NotZero(t, id)
		leased = append(leased, id)
		payloads[id] = payload
	}

	proxy.Stop() // connections cut, new ones refused
	require.Eventually(t, e.server.health.down.Load, 15*time.Second, 20*time.Millisecond, "the outage is noticed")
	for _, id := range leased {
		p.result(e.svcName, id, payloads[id])
	}
	require.Eventually(t, func() bool {
		n, held, refused := e.server.sink.outage.counts()
		return n == 1 && held == 1 && refused == 1
	}, 10*time.Second, 20*time.Millisecond, "one result held, one refused")
	held := e.server.sink.outage.heldTasks()
	require.Len(t, held, 1)
	kept, refused := held[0], leased[0]
	if refused == kept {
		refused = leased[1]
	}
	require.Contains(t, leased, kept)
	require.Equal(t, queue.StatusDispatched, e.status(kept), "nothing recorded while the database is away")

	require.NoError(t, proxy.Start())
	require.Eventually(t, func() bool { return e.status(kept) == queue.StatusNoProblem }, time.Minute,
		20*time.Millisecond, "the held result claimed once the database is back")
	require.False(t, e.server.health.down.Load(), "the outage is over")
	decided := claimsDecided(e)
	p.result(e.svcName, kept, payloads[kept]) // the same result again
	require.Eventually(t, func() bool { return claimsDecided(e) > decided }, 10*time.Second, 20*time.Millisecond,
		"the copy's claim decided")
	var accepted int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM attempts WHERE task_id = $1 AND outcome = 'accepted'`,
		kept).Scan(&accepted))
	require.Equal(t, 1, accepted, "the held result recorded once")
	require.Equal(t, queue.StatusDispatched, e.status(refused), "the refused result's task waits for its lease to expire")
	n, _, _ := e.server.sink.outage.counts()
	require.Zero(t, n, "nothing left held")
}

// heldTasks is the tasks of the results held now, oldest first.
func (o *outageHeld) heldTasks() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]int64, len(o.items))
	for i, in := range o.items {
		ids[i] = in.res.TaskID
	}
	return ids
}

// claimsDecided is how many replies the server's claims decided, whatever the outcome.
func claimsDecided(e *env) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { e.server.metrics.claims.Collect(ch); close(ch) }()
	var n float64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			n += d.GetCounter().GetValue()
		}
	}
	return n
}

// TestWorkerCutOffMidTaskComesBackLate holds a worker's result in its link to the sink past
// its lease: the lease expires, the task is leased to another worker, and the cut-off worker's
// result, delivered once the link lets it through, follows the late-result rules: it is
// recorded, once, and the retry's result after it is not.
func TestWorkerCutOffMidTaskComesBackLate(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := newEnv(t, withClock(clock))
	e.stage(1, 500)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	zerolog.SetGlobalLevel(zerolog.ErrorLevel)
	link := toxiproxy.NewProxy(srv, "sink", "127.0.0.1:0", strings.TrimPrefix(e.sink, "tcp://"))
	require.NoError(t, srv.Collection.Add(link, true))
	t.Cleanup(link.Stop)

	cut := newRawPeer(t, e, "cut-off")
	cutPush, err := zmq.NewSocket(zmq.PUSH)
	require.NoError(t, err)
	t.Cleanup(func() { cutPush.Close() })
	require.NoError(t, cutPush.SetLinger(0))
	require.NoError(t, cutPush.Connect("tcp://"+link.Listen))
	id, payload := cut.lease("echo")
	require.NotZero(t, id)

	// The link holds what the worker sends for 3 s (a timeout toxic would drop it: the
	// connection's stream would be lost, and the result with it).
	_, err = link.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"held","type":"latency","stream":"upstream","attributes":{"latency":3000}}`))
	require.NoError(t, err)
	_, err = cutPush.SendMessage("cut-off", "echo", strconv.FormatInt(id, 10), payload)
	require.NoError(t, err) // held in the link

	clock.Advance(2 * time.Minute) // past the lease
	require.Equal(t, 1, e.reap().Requeued)
	other := newRawPeer(t, e, "other")
	again, otherPayload := other.lease("echo")
	require.Equal(t, id, again, "the task is leased again")

	e.waitStatus(id, queue.StatusNoProblem) // the held result, through once its 3 s are over
	e.waitOutcome(id, 1, 0, "accepted")
	decided := claimsDecided(e)
	other.result("echo", id, otherPayload)
	require.Eventually(t, func() bool { return claimsDecided(e) > decided }, 10*time.Second, 20*time.Millisecond,
		"the retry's result decided")
	var accepted int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM attempts WHERE task_id = $1 AND outcome = 'accepted'`,
		id).Scan(&accepted))
	require.Equal(t, 1, accepted, "one accepted attempt: the late one")
}
