package dispatch

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/allowlist"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/wire"
	"github.com/cortexq/cortexq/worker"
)

// keyPair is a CURVE key pair, Z85.
type keyPair struct{ public, secret string }

func newKeyPair(t *testing.T) keyPair {
	t.Helper()
	pub, sec, err := zmq.NewCurveKeypair()
	require.NoError(t, err)
	return keyPair{pub, sec}
}

// withCurve turns CURVE on with server's key pair and a fast allow-list poll.
func withCurve(server keyPair) envOption {
	return func(_ *lease.Config, d *Config) {
		d.Security.CurveSecretKey = server.secret
		d.Security.KeysRefresh = 100 * time.Millisecond
	}
}

// curveEnv is an env with CURVE on, and its server's key pair.
func curveEnv(t *testing.T, opts ...envOption) (*env, keyPair) {
	t.Helper()
	require.True(t, zmq.HasCurve(), "libzmq has CURVE")
	server := newKeyPair(t)
	e := newEnv(t, append([]envOption{withCurve(server)}, opts...)...)
	require.Equal(t, server.public, e.server.PublicKey())
	return e, server
}

// allow puts a key on the allow-list and makes the server read it.
func (e *env) allow(k keyPair, name string) {
	e.t.Helper()
	_, err := allowlist.New(e.pool).Allow(e.ctx, k.public, name)
	require.NoError(e.t, err)
	require.NoError(e.t, e.server.ReloadKeys(e.ctx))
}

// revoke takes a key off the allow-list and makes the server read it.
func (e *env) revoke(k keyPair) {
	e.t.Helper()
	_, err := allowlist.New(e.pool).Revoke(e.ctx, k.public, "")
	require.NoError(e.t, err)
	require.NoError(e.t, e.server.ReloadKeys(e.ctx))
}

// curveWorkers runs n echo workers with key k.
func (e *env) curveWorkers(n int, server, k keyPair, tune ...func(*worker.Config)) (*worker.Stats, func()) {
	return e.workers(n, append([]func(*worker.Config){func(c *worker.Config) {
		c.Curve = &worker.Curve{ServerKey: server.public, PublicKey: k.public, SecretKey: k.secret}
	}}, tune...)...)
}

// newCurvePeer is newRawPeer with CURVE: k is the peer's key pair (nil: a plain peer).
func newCurvePeer(t *testing.T, e *env, identity string, server keyPair, k *keyPair) *rawPeer {
	t.Helper()
	p := &rawPeer{t: t, identity: identity, e: e}
	t.Cleanup(p.close)
	var err error
	p.dealer, err = zmq.NewSocket(zmq.DEALER)
	require.NoError(t, err)
	p.push, err = zmq.NewSocket(zmq.PUSH)
	require.NoError(t, err)
	for _, s := range []*zmq.Socket{p.dealer, p.push} {
		require.NoError(t, s.SetLinger(0))
		if k != nil {
			require.NoError(t, s.ClientAuthCurve(server.public, k.public, k.secret))
		}
	}
	require.NoError(t, p.dealer.SetIdentity(identity))
	require.NoError(t, p.dealer.SetRcvtimeo(10*time.Second))
	require.NoError(t, p.dealer.Connect(e.vent))
	require.NoError(t, p.push.SetSndtimeo(2*time.Second))
	require.NoError(t, p.push.Connect(e.sink))
	return p
}

// requireNoReply sends a request and requires that nothing comes back within wait.
func (p *rawPeer) requireNoReply(service string, wait time.Duration) {
	p.t.Helper()
	_, _ = p.dealer.Send(service, zmq.DONTWAIT) // not even queued when no connection was made
	require.NoError(p.t, p.dealer.SetRcvtimeo(wait))
	msg, err := p.dealer.RecvMessageBytes(0)
	require.Error(p.t, err, "no reply expected, got %q", msg)
	require.NoError(p.t, p.dealer.SetRcvtimeo(10*time.Second))
}

// pushResult pushes a result without requiring the send to succeed (a refused peer may have
// no connection to queue it on).
func (p *rawPeer) pushResult(service string, id int64, data []byte) {
	_, _ = p.push.SendMessage(p.identity, service, strconv.FormatInt(id, 10), data)
}

func (e *env) claims(outcome lease.Outcome) float64 {
	return counterValue(e.server.metrics.claims.WithLabelValues(string(outcome)))
}

func (e *env) discarded(socket, reason string) float64 {
	return discardedOf(e.server, socket, reason)
}

// discardedOf reads how many messages s discarded on socket for reason.
func discardedOf(s *Server, socket, reason string) float64 {
	return counterValue(s.metrics.discards.WithLabelValues(socket, reason))
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// eventually polls cond every 20 ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 20*time.Millisecond, what)
}

func TestCurve(t *testing.T) {
	t.Run("AllowedWorkersWorkEndToEnd", func(t *testing.T) {
		t.Parallel()
		e, server := curveEnv(t)
		alice := newKeyPair(t)
		e.allow(alice, "alice")
		ids := e.stage(40, 150_000)
		stats, stop := e.curveWorkers(4, server, alice)
		e.waitTerminal(60*time.Second, false)
		stop()
		e.requireEchoed(ids)
		require.Equal(t, uint64(40), stats.Tasks.Load())
		var plain int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM attempts WHERE worker NOT LIKE 'key:alice/echo-%'`).Scan(&plain))
		require.Zero(t, plain, "every attempt is recorded under the authenticated key")
		require.NoError(t, e.store.FlushWorkers(e.ctx))
		var results int64
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT coalesce(sum(results), 0)::bigint FROM workers WHERE name LIKE 'key:alice/%'`).Scan(&results))
		require.Equal(t, int64(40), results, "the workers table counts every result under its key")
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM workers WHERE name NOT LIKE 'key:alice/%'`).Scan(&plain))
		require.Zero(t, plain)
	})

	t.Run("WorkerWithoutAnAllowedKeyGetsNothingAndItsPushesAreDropped", func(t *testing.T) {
		t.Parallel()
		e, server := curveEnv(t)
		alice, mallory := newKeyPair(t), newKeyPair(t)
		e.allow(alice, "alice")
		ids := e.stage(3, 1000)

		// Refused at the handshake: an unknown key, a plain peer, a peer expecting another server.
		stranger := newCurvePeer(t, e, "stranger", server, &mallory)
		plain := newCurvePeer(t, e, "plain", server, nil)
		impostor := newKeyPair(t)
		wrongServer := newCurvePeer(t, e, "wrong-server", impostor, &alice)
		for _, p := range []*rawPeer{stranger, plain, wrongServer} {
			p.requireNoReply("echo", 500*time.Millisecond)
		}
		eventually(t, "the ZAP handler refused the unknown key", func() bool {
			return counterValue(e.server.sec.refused.WithLabelValues("zap")) > 0
		})

		// A task leased to alice's worker: pushes from every refused peer are dropped.
		holder := newCurvePeer(t, e, "w1", server, &alice)
		id, payload := holder.lease("echo")
		require.Equal(t, ids[0], id)
		for _, p := range []*rawPeer{stranger, plain, wrongServer} {
			p.pushResult("echo", id, sourceZip(t, 3, 10, 0)) // "Error" if it were taken
		}
		time.Sleep(500 * time.Millisecond)
		require.Equal(t, queue.StatusDispatched, e.status(id), "no refused push was recorded")
		require.Zero(t, e.claims(lease.OutcomeAccepted))

		holder.result("echo", id, payload)
		e.waitStatus(id, queue.StatusNoProblem)
		var worker string
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT worker FROM attempts WHERE task_id = $1`, id).Scan(&worker))
		require.Equal(t, "key:alice/w1", worker)
		e.requireEchoed(ids[:1])
	})

	t.Run("OnlyAKeyThatHeldAnAttemptMayAnswer", func(t *testing.T) {
		t.Parallel()
		e, server := curveEnv(t)
		alice, bob := newKeyPair(t), newKeyPair(t)
		e.allow(alice, "alice")
		e.allow(bob, "bob")
		ids := e.stage(1, 1000)
		holder := newCurvePeer(t, e, "w1", server, &alice)
		id, payload := holder.lease("echo")
		require.Equal(t, ids[0], id)

		// bob writes alice's worker's name in the identity frame: the key decides, not the frame.
		thief := newCurvePeer(t, e, "w1", server, &bob)
		thief.result("echo", id, sourceZip(t, 3, 10, 0))
		eventually(t, "bob's result is dropped as not_holder", func() bool { return e.discarded("sink", "not_holder") == 1 })
		require.Equal(t, queue.StatusDispatched, e.status(id))

		// Another process of alice's key (another identity) may answer: the key held the attempt.
		sibling := newCurvePeer(t, e, "w2", server, &alice)
		sibling.result("echo", id, payload)
		e.waitStatus(id, queue.StatusNoProblem)
		e.requireEchoed(ids)
	})

	t.Run("AKeyHoldingNoAttemptCostsNoParse", func(t *testing.T) {
		t.Parallel()
		// One hand-driven worker holds all 16; the bogus budget barely refills (0.01/s), so what
		// the bombs were charged still shows however slowly a loaded machine drops them.
		e, server := curveEnv(t, withWorkerCap(16), withSecurity(func(s *Security) { s.PeerBogusRate = 0.01 }))
		alice, mallory := newKeyPair(t), newKeyPair(t)
		e.allow(alice, "alice")
		e.allow(mallory, "mallory")
		ids := e.stage(16, 1000)
		holder := newCurvePeer(t, e, "w1", server, &alice)
		payloads := map[int64][]byte{}
		for range ids {
			id, payload := holder.lease("echo")
			payloads[id] = payload
		}
		// One of alice's tasks is not in the hot mirror (as for another replica's lease, or
		// after a restart): the database answers for it.
		e.server.hot.Delete(ids[0])

		// mallory, allowed but holding nothing, sends the huge-report bomb for 15 of alice's
		// tasks (one of them not mirrored): each is dropped before it is parsed, and charged.
		bomb := zipOf(t, zm{name: "cortex.log", body: strings.Repeat("Warning:amp:x "+strings.Repeat("x", 1990)+"\n", 10_000), deflate: true})
		thief := newCurvePeer(t, e, "w1", server, &mallory)
		for _, id := range ids[:15] {
			thief.result("echo", id, bomb)
		}
		eventually(t, "every bomb is dropped as not_holder", func() bool { return e.discarded("sink", "not_holder") == 15 })
		require.Zero(t, e.claims(lease.OutcomeNotHolder), "none reached a claim")
		require.Zero(t, e.server.claims.parsedBytes.Load())
		mallorys := e.server.sec.peerBucket(peer{key: "mallory"}, time.Now())
		mallorys.mu.Lock()
		require.Less(t, mallorys.tokens, float64(PeerBogusBurstDefault-10), "mallory's bogus budget was charged")
		mallorys.mu.Unlock()
		entries, err := filepath.Glob(filepath.Join(e.dir, "*", ".echo.zip.tmp-*"))
		require.NoError(t, err)
		require.Empty(t, entries, "no temp archive written")

		// alice's results, mirrored or not, are taken.
		for id, payload := range payloads {
			holder.result("echo", id, payload)
		}
		e.waitTerminal(30*time.Second, false)
		e.requireEchoed(ids)
	})

	t.Run("RevocationTakesEffectWithoutRestart", func(t *testing.T) {
		t.Parallel()
		e, server := curveEnv(t)
		alice := newKeyPair(t)
		e.allow(alice, "alice")
		first := e.stage(10, 1000)
		_, stop := e.curveWorkers(2, server, alice, func(c *worker.Config) { c.IOTimeout = time.Second })
		e.waitTerminal(30*time.Second, false)
		e.requireEchoed(first)

		// Revoked through the table alone: the poller picks it up, no ReloadKeys.
		_, err := allowlist.New(e.pool).Revoke(e.ctx, "", "alice")
		require.NoError(t, err)
		eventually(t, "the revocation is read", func() bool { _, ok := e.server.sec.allowed(alice.public); return !ok })
		// A connected peer of the revoked key: its requests and pushes are dropped.
		peer := newCurvePeer(t, e, "late", server, &alice)
		peer.requireNoReply("echo", 300*time.Millisecond)
		second := e.stage(10, 1000)
		time.Sleep(time.Second)
		require.Equal(t, 10, e.counts()[queue.StatusTODO], "no task leased to a revoked key")
		require.Positive(t, e.discarded("ventilator", "key_not_allowed"))

		// Allowed again (a new name): the same workers reconnect and finish.
		_, err = allowlist.New(e.pool).Allow(e.ctx, alice.public, "alice2")
		require.NoError(t, err)
		e.waitTerminal(30*time.Second, false)
		stop()
		e.requireEchoed(second)
		var n int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM attempts WHERE worker LIKE 'key:alice2/%' AND task_id = ANY($1)`, second).Scan(&n))
		require.Equal(t, 10, n)
	})

	t.Run("RevokedKeysPushesForItsOwnLeaseAreDropped", func(t *testing.T) {
		t.Parallel()
		e, server := curveEnv(t)
		alice := newKeyPair(t)
		e.allow(alice, "alice")
		ids := e.stage(1, 1000)
		p := newCurvePeer(t, e, "w1", server, &alice)
		id, payload := p.lease("echo")
		require.Equal(t, ids[0], id)
		e.revoke(alice)
		p.pushResult("echo", id, payload)
		eventually(t, "the push is dropped", func() bool { return e.discarded("sink", "key_not_allowed") == 1 })
		require.Equal(t, queue.StatusDispatched, e.status(id))
	})
}

func TestLoopback(t *testing.T) {
	for ep, want := range map[string]bool{
		"tcp://127.0.0.1:51695": true, "tcp://127.0.0.1:*": true, "tcp://localhost:1": true, "tcp://[::1]:5": true,
		"inproc://x": true, "ipc:///tmp/x": true,
		"tcp://*:51695": false, "tcp://0.0.0.0:51696": false, "tcp://10.0.0.1:1": false, "tcp://eth0:1": false,
		"tcp://[::]:1": false,
	} {
		require.Equal(t, want, loopback(ep), ep)
	}
}

// TestCurveHandOutTimeReachesTheClaim: a result from a CURVE worker whose hand-out is not
// attributed yet carries the hand-out's time to its claim, as a plain worker's does. The
// mirror names the worker with its key's prefix, the result frame without it.
func TestCurveHandOutTimeReachesTheClaim(t *testing.T) {
	e, server := curveEnv(t)
	alice := newKeyPair(t)
	e.allow(alice, "alice")
	ids := e.stage(1, 1000)
	holder := newCurvePeer(t, e, "w1", server, &alice)
	id, payload := holder.lease("echo")
	require.Equal(t, ids[0], id)

	// As if its attribution were still to be written (the lease call waited for it).
	h, ok := e.server.hot.Get(id)
	require.True(t, ok, "the hand-out is mirrored")
	require.Equal(t, lease.KeyedWorker("alice", "w1"), h.Worker)
	h.Pending, h.HandedOut = true, time.Now().Add(-2*time.Second)
	e.server.hot.Put(h)

	res := wire.Result{Identity: "w1", Service: "echo", TaskID: id, Data: [][]byte{payload}, Size: int64(len(payload))}
	// As the receiver hands it on: the worker named as leases name it, the mirror's entry.
	in := inbound{res: res, from: peer{key: "alice"}, worker: lease.KeyedWorker("alice", "w1")}
	in.mirror, in.mirrored = e.server.hot.Get(id)
	it, reason, err := e.server.sink.prepare(withPeer(e.ctx, in.from), in)
	require.NoError(t, err, reason)
	require.True(t, it.result.HandedOut.Equal(h.HandedOut), "the claim gets the hand-out's time, got %v", it.result.HandedOut)
	require.Equal(t, "alice", it.result.Key)
	require.Equal(t, in.worker, it.result.Worker)

	// A plain peer writing the same identity is not the holder the mirror names.
	in.from, in.worker = peer{}, "w1"
	it, reason, err = e.server.sink.prepare(e.ctx, in)
	require.NoError(t, err, reason)
	require.True(t, it.result.HandedOut.IsZero())
}
