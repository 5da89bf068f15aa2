package dispatch

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest/leasetest"
	"github.com/cortexq/cortexq/queue/wire"
	"github.com/cortexq/cortexq/worker"
)

// Hostile peers: each input leaves the replica up and every real task correct.

func withSecurity(f func(*Security)) envOption {
	return func(_ *lease.Config, d *Config) { f(&d.Security) }
}

// tcpAddr is the host:port of a tcp:// endpoint.
func tcpAddr(t *testing.T, endpoint string) string {
	t.Helper()
	addr, ok := strings.CutPrefix(endpoint, "tcp://")
	require.True(t, ok, endpoint)
	return addr
}

// greeting is a ZMTP 3.0 greeting announcing mechanism, as a client sends it.
func greeting(mechanism string) []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10], g[11] = 0xff, 0x7f, 3, 0
	copy(g[12:32], mechanism)
	return g
}

func TestHostile(t *testing.T) {
	t.Run("SlowLorisConnectionsAreCutAndBlockNoOne", func(t *testing.T) {
		for _, curve := range []bool{false, true} {
			t.Run(map[bool]string{false: "Plain", true: "Curve"}[curve], func(t *testing.T) {
				t.Parallel()
				short := withSecurity(func(s *Security) { s.HandshakeTimeout = 500 * time.Millisecond })
				var e *env
				var server, alice keyPair
				mechanism := "NULL"
				if curve {
					e, server = curveEnv(t, short)
					alice = newKeyPair(t)
					e.allow(alice, "alice")
					mechanism = "CURVE"
				} else {
					e = newEnv(t, short)
				}
				// 40 connections that stall: half after a few bytes of the signature, half after a
				// whole greeting, on both sockets.
				var conns []net.Conn
				for i := range 40 {
					ep := e.vent
					if i%2 == 1 {
						ep = e.sink
					}
					c, err := net.Dial("tcp", tcpAddr(t, ep))
					require.NoError(t, err)
					t.Cleanup(func() { c.Close() })
					if i%4 < 2 {
						_, err = c.Write([]byte{0xff, 0, 0})
					} else {
						_, err = c.Write(greeting(mechanism))
					}
					require.NoError(t, err)
					conns = append(conns, c)
				}
				ids := e.stage(30, 20_000)
				var stop func()
				if curve {
					_, stop = e.curveWorkers(3, server, alice)
				} else {
					_, stop = e.workers(3)
				}
				e.waitTerminal(60*time.Second, false)
				stop()
				e.requireEchoed(ids)
				// Each stalled connection was closed by the replica after the handshake timeout.
				for _, c := range conns {
					require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
					_, err := io.Copy(io.Discard, c) // the replica's greeting, then EOF
					if err != nil {
						require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "a stalled connection is still open")
					}
				}
			})
		}
	})

	t.Run("OversizedFramesCutTheConnectionOnly", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, withMaxResult(16<<10)) // the sink takes frames up to 32 KiB
		ids := e.stage(20, 1000)
		// A request over the ventilator's 64 KiB: no reply, no lease.
		big := newRawPeer(t, e, "big")
		_, err := big.dealer.SendMessage("echo", bytes.Repeat([]byte("x"), 1<<20))
		require.NoError(t, err)
		require.NoError(t, big.dealer.SetRcvtimeo(time.Second))
		_, err = big.dealer.RecvMessageBytes(0)
		require.Error(t, err, "an oversized request gets nothing")
		require.Equal(t, 20, e.counts()[queue.StatusTODO])

		// A result over the sink's limit, for a leased task: dropped with its connection.
		holder := newRawPeer(t, e, "holder")
		id, payload := holder.lease("echo")
		require.NotZero(t, id)
		holder.result("echo", id, bytes.Repeat([]byte("y"), 1<<20))
		time.Sleep(500 * time.Millisecond)
		require.Equal(t, queue.StatusDispatched, e.status(id))
		// The worker pushes again on a new socket: taken.
		again := newRawPeer(t, e, "holder")
		again.result("echo", id, payload)
		e.waitStatus(id, queue.StatusNoProblem)

		e.echoAll(3, false, ids)
	})

	t.Run("BogusTaskIDSpamIsBoundedAndRealTasksFinish", func(t *testing.T) {
		t.Parallel()
		const rate, burst = 50.0, 100
		clock := &testClock{}
		e := newEnv(t, withClock(clock), withSecurity(func(s *Security) {
			s.PeerBogusRate, s.PeerBogusBurst = rate, burst
		}))
		ids := e.stage(60, 5000)
		_, stop := e.workers(4)

		const spam = 20_000
		push, err := zmq.NewSocket(zmq.PUSH)
		require.NoError(t, err)
		defer push.Close()
		require.NoError(t, push.SetLinger(0))
		require.NoError(t, push.Connect(e.sink))
		start := time.Now()
		for i := range spam {
			id := 900_000_000 + i // a new bogus id each time…
			if i%2 == 1 {
				id = 899_999_999 // …or the same one again
			}
			_, err := push.SendMessage("spammer", "echo", strconv.Itoa(id), "PK junk")
			require.NoError(t, err)
		}
		dropped := func() float64 {
			return e.discarded("sink", "unknown_task") + e.discarded("sink", "slow_lane_full")
		}
		require.Eventually(t, func() bool { return dropped() == spam }, 60*time.Second, 20*time.Millisecond,
			"every bogus result is counted as dropped")
		elapsed := time.Since(start).Seconds()
		lookups, slow := e.server.sec.coldLookups.Load(), e.server.sec.slowLookups.Load()
		bound := int64(burst+rate*elapsed) + int64(e.server.cfg.Writers)
		slowBound := int64(elapsed/slowLaneEvery.Seconds()) + 2
		t.Logf("%d bogus results in %.2fs: %d ids looked up at once (bound %d), %d slow-lane queries (bound %d), %.0f dropped with the slow lane full",
			spam, elapsed, lookups, bound, slow, slowBound, e.discarded("sink", "slow_lane_full"))
		require.LessOrEqual(t, lookups, bound, "ids looked up at once within burst + rate × time")
		require.LessOrEqual(t, slow, slowBound, "one slow-lane query per slowLaneEvery")
		require.Positive(t, counterValue(e.server.sec.limited), "the spammer's results went to the slow lane")

		// A real result that found its task missing from the hot mirror (a resync can drop a
		// lease made during it) is looked up at once, or in the slow lane while the flood has
		// spent the budget of its address; only with the slow lane full is it dropped, and then
		// its lease expires and the reaper retries the task.
		e.waitTerminalReaping(clock, 60*time.Second)
		stop()
		e.requireEchoed(ids)

		// The budget refills: a real result for a task this replica does not mirror (leased by
		// another replica) is looked up and taken.
		other := lease.New(e.pool, lease.Config{Replica: "r2", LeaseTimeout: time.Minute})
		more := e.stage(1, 100)
		leases, err := leasetest.Lease(e.ctx, other, leasetest.Request{ServiceID: e.svc, Workers: []string{"elsewhere"}})
		require.NoError(t, err)
		require.Len(t, leases, 1)
		require.Equal(t, more[0], leases[0].TaskID)
		src, err := os.ReadFile(e.entry(more[0]))
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond)
		p := newRawPeer(t, e, "elsewhere")
		p.result("echo", more[0], src)
		e.waitStatus(more[0], queue.StatusNoProblem)
	})

	t.Run("BogusResultFloodDropsNoHonestResult", func(t *testing.T) {
		// Two replicas, an echo worker connected to both (so about half the results for A's
		// leases reach B, which must look their tasks up), and results for tasks that do not
		// exist flooding B: from the worker's own address at 50/s, or from 20 addresses at 25/s
		// each. Every honest result is taken at its first attempt.
		for _, tc := range []struct {
			name    string
			sources int
			rate    float64
		}{{"OneAddress", 1, 50}, {"TwentyAddresses", 20, 25}} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				clock := &testClock{}
				e := newEnv(t, withClock(clock))
				b := e.replica("r2", clock)
				ids := e.stage(300, 1000)
				ctx, cancel := context.WithTimeout(e.ctx, 90*time.Second)
				defer cancel()
				var floods sync.WaitGroup
				defer floods.Wait()
				defer cancel()
				for i := range tc.sources {
					source := "" // the worker's address, 127.0.0.1
					if tc.sources > 1 {
						source = fmt.Sprintf("127.0.0.%d:0;", 2+i)
					}
					endpoint := "tcp://" + source + tcpAddr(t, b.sink)
					floods.Go(func() { floodBogus(ctx, t, endpoint, int64(900_000_000+i*1_000_000), tc.rate) })
				}
				// Let the floods spend what budgets they can before the honest work starts.
				time.Sleep(6 * time.Second)
				_, stop := e.workers(2, func(c *worker.Config) {
					c.Ventilator, c.Sink = e.vent+","+b.vent, e.sink+","+b.sink
				})
				e.waitTerminalReaping(clock, 120*time.Second)
				stop()
				cancel()
				floods.Wait()
				var attempts int
				require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM attempts WHERE task_id = ANY($1)`, ids).Scan(&attempts))
				leased := e.server.metrics.leases
				t.Logf("%d honest tasks (%0.f leased by A, %0.f by B), %d attempts: %d honest results dropped; B parked %.0f results in the slow lane in %d queries, dropped %.0f as unknown",
					len(ids), counterValue(leased), counterValue(b.server.metrics.leases), attempts, attempts-len(ids),
					counterValue(b.server.sec.limited), b.server.sec.slowLookups.Load(), discardedOf(b.server, "sink", "unknown_task"))
				require.Equal(t, len(ids), attempts, "every honest result is taken at its first attempt")
				require.Zero(t, discardedOf(b.server, "sink", "slow_lane_full"))
				// Leases of one replica answered through the other are counted against the
				// worker there until a resync, which a request at the cap waits for: it is
				// never refused for them.
				for _, s := range []*Server{e.server, b.server} {
					require.Zero(t, counterValue(s.metrics.mocks.WithLabelValues("worker_cap")))
				}
				e.requireEchoed(ids)
			})
		}
	})

	t.Run("AReplyFreesItsWorkersCapBeforeItsClaim", func(t *testing.T) {
		// A worker replies, then asks for its next task before the claim of its reply: that
		// request must not wait at the cap (an echo fleet ran at 70 tasks/s when it did).
		t.Parallel()
		e := newEnv(t, withWorkerCap(1))
		ids := e.stage(2, 1000)
		p := newRawPeer(t, e, "quick")
		id, payload := p.lease("echo")
		require.NotZero(t, id)
		// Its claim waits on the task's row lock: the reply stays unclaimed, its task mirrored.
		release := e.hold(`SELECT id FROM tasks WHERE id = $1 FOR UPDATE`, id)
		p.result("echo", id, payload)
		eventually(t, "the reply uncounts its lease", func() bool { return e.server.hot.Held("quick") == 0 })
		_, mirrored := e.server.hot.Get(id)
		require.True(t, mirrored, "the task stays mirrored until its claim")
		next, nextPayload := p.lease("echo")
		require.Contains(t, ids, next, "the next request is served at once, not held at the cap")
		release()
		p.result("echo", next, nextPayload)
		e.waitTerminal(30*time.Second, false)
		e.requireEchoed(ids)
	})

	t.Run("AWorkerThatNeverAnswersHoldsOnlyItsCap", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, func(l *lease.Config, d *Config) { l.LeaseTimeout, d.MaxInFlight = 3*time.Second, 30 })
		ids := e.stage(40, 1000)
		// The hoarder asks again as soon as it has a reply, and never answers.
		hoarder, err := zmq.NewSocket(zmq.DEALER)
		require.NoError(t, err)
		defer hoarder.Close()
		require.NoError(t, hoarder.SetLinger(0))
		require.NoError(t, hoarder.SetIdentity("hoarder"))
		require.NoError(t, hoarder.SetRcvtimeo(time.Second))
		require.NoError(t, hoarder.Connect(e.vent))
		ctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
		defer cancel()
		var hoarded atomic.Int64
		var hoarding sync.WaitGroup
		hoarding.Go(func() {
			for ctx.Err() == nil {
				if _, err := hoarder.Send("echo", 0); err != nil {
					return
				}
				if msg, err := hoarder.RecvMessageBytes(0); err == nil && string(msg[0]) != wire.MockTaskID {
					hoarded.Add(1)
				}
			}
		})
		defer hoarding.Wait()
		defer cancel()
		time.Sleep(500 * time.Millisecond) // the hoarder asks first
		_, stop := e.workers(1)
		// Reap as the leader would: the hoarder's leases expire after 3 s and are retried.
		deadline := time.Now().Add(60 * time.Second)
		for c := e.counts(); c[queue.StatusTODO]+c[queue.StatusDispatched] > 0; c = e.counts() {
			require.True(t, time.Now().Before(deadline), "tasks left: %v", c)
			e.reap()
			time.Sleep(250 * time.Millisecond)
		}
		stop()
		cancel()
		hoarding.Wait()
		c := e.counts()
		honest, dead := c[queue.StatusNoProblem], c[queue.StatusFatal]
		t.Logf("%d tasks: the honest worker completed %d, %d dead-lettered; the hoarder got %d leases and %.0f worker_cap replies",
			len(ids), honest, dead, hoarded.Load(), counterValue(e.server.metrics.mocks.WithLabelValues("worker_cap")))
		require.GreaterOrEqual(t, honest, len(ids)*9/10, "the honest worker gets at least 90%% of the tasks")
		require.LessOrEqual(t, dead, MaxInFlightPerWorkerDefault, "the hoarder dead-letters at most the tasks it can hold at once")
	})

	t.Run("AKeyHoldsOnlyItsCapWhateverItsWorkersCallThemselves", func(t *testing.T) {
		t.Parallel()
		e, server := curveEnv(t, func(_ *lease.Config, d *Config) { d.MaxInFlightPerKey = 2 })
		mallory, alice := newKeyPair(t), newKeyPair(t)
		e.allow(mallory, "mallory")
		e.allow(alice, "alice")
		e.stage(5, 100)
		// A fresh worker name for every request: each is under its own cap, not under its key's.
		for i := range 4 {
			id, _ := newCurvePeer(t, e, fmt.Sprintf("fresh-%d", i), server, &mallory).lease("echo")
			if i < 2 {
				require.NotZero(t, id)
			} else {
				require.Zero(t, id, "request %d of the key gets no work", i+1)
			}
		}
		id, _ := newCurvePeer(t, e, "w1", server, &alice).lease("echo")
		require.NotZero(t, id, "another key is not held back")
		require.Equal(t, 2.0, counterValue(e.server.metrics.mocks.WithLabelValues("worker_cap")))
	})

	t.Run("ASpammingKeySpendsOnlyItsOwnBudget", func(t *testing.T) {
		t.Parallel()
		e, server := curveEnv(t, withSecurity(func(s *Security) {
			s.PeerBogusRate, s.PeerBogusBurst = 1, 10
		}))
		alice, mallory := newKeyPair(t), newKeyPair(t)
		e.allow(alice, "alice")
		e.allow(mallory, "mallory")
		spammer := newCurvePeer(t, e, "spam", server, &mallory)
		for i := range 2000 {
			spammer.pushResult("echo", int64(700_000_000+i), []byte("junk"))
		}
		require.Eventually(t, func() bool {
			return e.discarded("sink", "unknown_task")+e.discarded("sink", "slow_lane_full") == 2000
		}, 30*time.Second, 20*time.Millisecond)
		require.LessOrEqual(t, e.server.sec.coldLookups.Load(), int64(10+30+e.server.cfg.Writers))

		// alice's result for a task leased through another replica is looked up at once.
		other := lease.New(e.pool, lease.Config{Replica: "r2", LeaseTimeout: time.Minute})
		ids := e.stage(1, 100)
		_, err := leasetest.Lease(e.ctx, other, leasetest.Request{ServiceID: e.svc, Workers: []string{lease.KeyedWorker("alice", "w1")}})
		require.NoError(t, err)
		src, err := os.ReadFile(e.entry(ids[0]))
		require.NoError(t, err)
		newCurvePeer(t, e, "w1", server, &alice).result("echo", ids[0], src)
		e.waitStatus(ids[0], queue.StatusNoProblem)
	})

	t.Run("UnknownAndWrongServiceFloodsAreBounded", func(t *testing.T) {
		t.Parallel()
		const rate, burst = 50.0, 100
		e := newEnv(t, withSecurity(func(s *Security) {
			s.PeerBogusRate, s.PeerBogusBurst = rate, burst
		}))
		_, err := e.pool.Exec(e.ctx, `INSERT INTO services (name) VALUES ('other')`)
		require.NoError(t, err)
		ids := e.stage(20, 1000)
		start := time.Now()
		// Requests for 1,500 services that do not exist, each a new name: every one is
		// answered, most without a lookup.
		p := newRawPeer(t, e, "namer")
		for i := range 1500 {
			id, _ := p.lease(fmt.Sprintf("nosuch-%d", i))
			require.Zero(t, id)
		}
		// Results for real tasks (TODO, so not mirrored) under another real service, and under
		// services that do not exist.
		for i := range 1500 {
			svc := "other"
			if i%2 == 1 {
				svc = fmt.Sprintf("gone-%d", i)
			}
			p.result(svc, ids[i%len(ids)], []byte("PK junk"))
		}
		dropped := func() float64 {
			n := 0.0
			for _, r := range []string{"wrong_service", "unknown_service", "unknown_service_rate_limited", "slow_lane_full"} {
				n += e.discarded("sink", r)
			}
			return n
		}
		require.Eventually(t, func() bool { return dropped() == 1500 }, 60*time.Second, 20*time.Millisecond,
			"every result is counted as dropped")
		elapsed := time.Since(start).Seconds()
		// Beyond the budget: one check in flight per writer, and the first lookups of the one
		// real service of the results ("other"), as many as writers, before it is cached.
		lookups := e.server.sec.coldLookups.Load() + e.server.sec.serviceLookups.Load()
		bound := int64(burst+rate*elapsed) + 2*int64(e.server.cfg.Writers)
		t.Logf("3000 bogus messages in %.2fs: %d database lookups (bound %d)", elapsed, lookups, bound)
		require.LessOrEqual(t, lookups, bound, "lookups within burst + rate × time")
		require.Equal(t, queue.StatusTODO, e.status(ids[0]), "no result under another service was taken")

		// Real workers of a real service are served all along: its name is cached.
		e.echoAll(2, false, ids)
	})

	t.Run("UnreadableSourceGetsNoWorkNotACutPayload", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(1, 1000)
		// The entry is a directory: it opens, but reading it fails.
		entry := e.entry(ids[0])
		require.NoError(t, os.Remove(entry))
		require.NoError(t, os.Mkdir(entry, 0o755))
		p := newRawPeer(t, e, "reader")
		id, payload := p.lease("echo")
		require.Zero(t, id, "no task is sent (a payload of %d bytes)", len(payload))
		var answered bool
		require.Eventually(t, func() bool {
			err := e.pool.QueryRow(e.ctx, `SELECT answered FROM dispatch WHERE task_id = $1`, ids[0]).Scan(&answered)
			return err == nil && answered
		}, 10*time.Second, 20*time.Millisecond, "the lease is marked answered, left to the reaper")
		require.Equal(t, queue.StatusDispatched, e.status(ids[0]))
	})

	t.Run("ResultFramesPastTheLimitsAreNotKept", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, withMaxResult(16<<10))
		ids := e.stage(2, 1000)
		p := newRawPeer(t, e, "framer")
		for range ids {
			id, _ := p.lease("echo")
			require.NotZero(t, id)
		}
		send := func(id int64, frames int, size int) {
			t.Helper()
			chunk := bytes.Repeat([]byte("z"), size)
			for _, f := range [][]byte{[]byte("framer"), []byte("echo"), []byte(strconv.FormatInt(id, 10))} {
				_, err := p.push.SendBytes(f, zmq.SNDMORE)
				require.NoError(t, err)
			}
			for i := range frames {
				flag := zmq.SNDMORE
				if i == frames-1 {
					flag = 0
				}
				_, err := p.push.SendBytes(chunk, flag)
				require.NoError(t, err)
			}
		}
		// 6,000,000 bytes in frames of 20,000, over the 16 KiB cap and the kept slack: recorded
		// Invalid with its whole size, though most of it was dropped as it came in.
		send(ids[0], 300, 20_000)
		e.waitStatus(ids[0], queue.StatusInvalid)
		var details string
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT details FROM task_messages WHERE task_id = $1 AND what = 'result_too_large'`, ids[0]).Scan(&details))
		require.Contains(t, details, "6000000 bytes")
		// No bytes at all in 70,000 frames: under the cap, but more frames than a replica keeps.
		send(ids[1], 70_000, 0)
		require.Eventually(t, func() bool { return e.discarded("sink", wire.ReasonTooManyFrames) == 1 },
			10*time.Second, 20*time.Millisecond)
		require.Equal(t, queue.StatusDispatched, e.status(ids[1]))
		// The worker's honest result is then taken.
		src, err := os.ReadFile(e.entry(ids[1]))
		require.NoError(t, err)
		p.result("echo", ids[1], src)
		e.waitStatus(ids[1], queue.StatusNoProblem)
	})

	t.Run("OneResultFramePastTheKeptPartIsRecordedInvalid", func(t *testing.T) {
		t.Parallel()
		// An 8 MiB cap keeps 12 MiB of a result and lets frames of up to 16 MiB through.
		e := newEnv(t, withMaxResult(8<<20))
		ids := e.stage(1, 1000)
		p := newRawPeer(t, e, "big")
		id, _ := p.lease("echo")
		require.Equal(t, ids[0], id)
		_, err := p.push.SendMessage("big", "echo", strconv.FormatInt(id, 10), bytes.Repeat([]byte("z"), 13<<20))
		require.NoError(t, err)
		e.waitStatus(id, queue.StatusInvalid)
		var details string
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT details FROM task_messages WHERE task_id = $1 AND what = 'result_too_large'`, id).Scan(&details))
		require.Contains(t, details, fmt.Sprintf("%d bytes", 13<<20))
	})

	t.Run("CraftedArchivesAreReadSafely", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, withWorkerCap(10))
		type craft struct {
			name    string
			archive []byte
			// status is the recorded status; 0 means the reply is unusable (task left in flight).
			status queue.Status
			what   string // a message the report must carry
		}
		crafts := []craft{
			{"ZipBomb", zipOf(t, zm{"cortex.log", "Status:conversion:0\n" + strings.Repeat(strings.Repeat("a", 1<<20)+"\n", 100), true}),
				queue.StatusNoProblem, "log_truncated"},
			{"HugeDeclaredMemberCount", zip64End(1 << 40), 0, ""},
			{"PathTricksBesideTheRealLog", zipOf(t,
				zm{"../cortex.log", "Status:conversion:4\n", false},
				zm{"/cortex.log", "Status:conversion:4\n", false},
				zm{"sub/cortex.log", "Status:conversion:4\n", false},
				zm{"..\\cortex.log", "Status:conversion:4\n", false},
				zm{"cortex.log", "Warning:tex:undefined\nStatus:conversion:1\n", false}),
				queue.StatusWarning, "undefined"},
			{"OnlyPathTricks", zipOf(t, zm{"../cortex.log", "Status:conversion:0\n", false}, zm{"a/../cortex.log", "Status:conversion:0\n", false}), 0, ""},
			{"SymlinkNamedCortexLog", symlinkZip(t, "cortex.log", "/etc/passwd"), queue.StatusFatal, ""},
			{"NotAZip", []byte("PK\x03\x04 this is not really a zip"), 0, ""},
			{"Empty", nil, 0, ""},
		}
		ids := e.stage(len(crafts), 100)
		p := newRawPeer(t, e, "crafter")
		for range crafts {
			id, _ := p.lease("echo")
			require.NotZero(t, id)
		}
		for i, c := range crafts {
			p.result("echo", ids[i], c.archive)
		}
		for i, c := range crafts {
			if c.status == 0 {
				e.waitOutcome(ids[i], 1, 0, "unusable")
				require.Equal(t, queue.StatusDispatched, e.status(ids[i]), "%s: left for the reaper", c.name)
				continue
			}
			e.waitStatus(ids[i], c.status)
			var msgs string
			require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT coalesce(string_agg(what || ' ' || details, E'\n'), '') FROM task_messages WHERE task_id = $1`, ids[i]).Scan(&msgs))
			require.Contains(t, msgs, c.what, c.name)
			require.NotContains(t, msgs, "root:", "%s: nothing outside the archive is read", c.name)
		}
		// Nothing was extracted anywhere: the only files are the sources and published archives.
		err := filepath.WalkDir(filepath.Dir(e.dir), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				base := filepath.Base(path)
				require.True(t, base == "source.zip" || base == "echo.zip", "unexpected file %s", path)
			}
			return nil
		})
		require.NoError(t, err)
		// Still serving.
		more := e.stage(1, 100)
		_, stop := e.workers(1)
		e.waitStatus(more[0], queue.StatusNoProblem)
		stop()
	})

	t.Run("ServiceNamesWithPathCharacters", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(1, 1000)
		holder := newRawPeer(t, e, "holder")
		id, payload := holder.lease("echo")
		require.Equal(t, ids[0], id)
		bad := []string{"../echo", "echo/..", "..", ".", "a\\b", "/etc/passwd", "echo\x00", "..%2f..", "echo/../../x", "\u2215etc"}
		p := newRawPeer(t, e, "pathy")
		for _, svc := range bad {
			gotID, _ := p.lease(svc)
			require.Zero(t, gotID, "%q gets a no-work reply", svc)
			p.result(svc, id, sourceZip(t, 3, 10, 0))
		}
		time.Sleep(300 * time.Millisecond)
		require.Equal(t, queue.StatusDispatched, e.status(id), "no result under a bad service name was taken")
		holder.result("echo", id, payload)
		e.waitStatus(id, queue.StatusNoProblem)
		e.requireEchoed(ids)
		err := filepath.WalkDir(filepath.Dir(e.dir), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				require.Contains(t, []string{"source.zip", "echo.zip"}, filepath.Base(path))
			}
			return nil
		})
		require.NoError(t, err)
	})

	t.Run("FloodsUnderCurveLeaveRealTasksCorrect", func(t *testing.T) {
		t.Parallel()
		clock := &testClock{}
		e, server := curveEnv(t, withClock(clock))
		alice, mallory := newKeyPair(t), newKeyPair(t)
		e.allow(alice, "alice")
		ids := e.stage(50, 20_000)
		_, stop := e.curveWorkers(3, server, alice)
		var wg sync.WaitGroup
		for _, k := range []*keyPair{&alice, &mallory, nil} {
			wg.Go(func() {
				p := newCurvePeer(t, e, "flood", server, k)
				for i := range 5000 {
					// DONTWAIT: a refused peer has no connection to queue on.
					_, _ = p.dealer.SendMessageDontwait("echo", "extra", strconv.Itoa(i))
					_, _ = p.push.SendMessageDontwait("flood", "echo", strconv.Itoa(800_000_000+i), "x")
					if i%500 == 0 {
						for {
							if _, err := p.dealer.RecvMessageBytes(zmq.DONTWAIT); err != nil {
								break
							}
						}
					}
				}
			})
		}
		wg.Wait()
		deadline := time.Now().Add(60 * time.Second)
		for c := e.counts(); c[queue.StatusTODO]+c[queue.StatusDispatched] > 0; c = e.counts() {
			require.True(t, time.Now().Before(deadline), "tasks left: %v", c)
			// Tasks the flooding peer of alice's key took and never answered expire and are retried.
			clock.Advance(2 * time.Minute)
			e.reap()
			time.Sleep(200 * time.Millisecond)
		}
		stop()
		// Tasks the flooding alice peer took and never answered were retried by the reaper.
		for _, id := range ids {
			require.Equal(t, queue.StatusNoProblem, e.status(id))
		}
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, e.server.ReloadKeys(ctx), "the replica still answers")
	})

	t.Run("HugeReportsWaitForTheParsedBudgetAndKeepExactTotals", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, func(_ *lease.Config, c *Config) { c.MaxParsedBytes = 1 << 20 }, withWorkerCap(6))
		ids := e.stage(6, 1000)
		p := newRawPeer(t, e, "bomber")
		for range ids {
			id, _ := p.lease("echo")
			require.NotZero(t, id)
		}
		// Claims wait on the tasks' row locks: parsed reports pile up before them, within the
		// budget (each report, 2 MB, is larger than it and taken alone).
		release := e.hold(`SELECT id FROM tasks FOR UPDATE`)
		line := "Warning:amp:x " + strings.Repeat("x", 1990) + "\n"
		bomb := zipOf(t, zm{name: "cortex.log", body: strings.Repeat(line, 3000) + "Error:tex:e after\nStatus:conversion:2\n", deflate: true})
		for _, id := range ids {
			p.result("echo", id, bomb)
		}
		eventually(t, "a report holds the whole budget", func() bool { return e.server.claims.parsedBytes.Load() == 1<<20 })
		time.Sleep(300 * time.Millisecond)
		require.Equal(t, int64(1<<20), e.server.claims.parsedBytes.Load(), "no more reports than the budget holds")
		release()

		for _, id := range ids {
			e.waitStatus(id, queue.StatusError)
			var warnings, errs int
			var total string
			require.NoError(t, e.pool.QueryRow(e.ctx, `
				SELECT count(*) FILTER (WHERE severity = 'warning' AND what = 'x'),
				       count(*) FILTER (WHERE severity = 'error'),
				       coalesce(string_agg(details, '') FILTER (WHERE what = 'messages_truncated'), '')
				FROM task_messages WHERE task_id = $1`, id).Scan(&warnings, &errs, &total))
			require.Equal(t, 1000, warnings)
			require.Equal(t, 1, errs, "a severity under the cap is whole")
			require.Equal(t, "3000 warning messages in all; the first 1000 were kept", total)
		}
		eventually(t, "the budget is back", func() bool { return e.server.claims.parsedBytes.Load() == 0 })
		require.Zero(t, e.discarded("sink", "unknown_task"))
	})
}

// floodBogus pushes results for new task ids that do not exist, from first on, to endpoint at
// rate a second until ctx is done.
func floodBogus(ctx context.Context, t *testing.T, endpoint string, first int64, rate float64) {
	push, err := zmq.NewSocket(zmq.PUSH)
	require.NoError(t, err)
	defer push.Close()
	require.NoError(t, push.SetLinger(0))
	require.NoError(t, push.Connect(endpoint))
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for id := first; ; id++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_, _ = push.SendMessageDontwait("flood", "echo", strconv.FormatInt(id, 10), "PK junk")
	}
}

// waitTerminalReaping waits until no task is TODO or dispatched; whenever nothing moved for 3 s
// it moves the lease clock past every lease and reaps, as the leader would once they expire.
func (e *env) waitTerminalReaping(clock *testClock, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	last, since := -1, time.Now()
	for {
		c := e.counts()
		left := c[queue.StatusTODO] + c[queue.StatusDispatched]
		if left == 0 {
			return
		}
		require.True(e.t, time.Now().Before(deadline), "tasks not terminal after %s: %v", timeout, c)
		if left != last {
			last, since = left, time.Now()
		} else if time.Since(since) > 3*time.Second {
			clock.Advance(2 * time.Minute)
			e.reap()
			since = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// zm is a member of a test archive.
type zm struct {
	name, body string
	deflate    bool
}

func zipOf(t *testing.T, members ...zm) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, m := range members {
		method := zip.Store
		if m.deflate {
			method = zip.Deflate
		}
		f, err := w.CreateHeader(&zip.FileHeader{Name: m.name, Method: method})
		require.NoError(t, err)
		_, err = io.WriteString(f, m.body)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// symlinkZip is an archive whose member name is a symbolic link to target.
func symlinkZip(t *testing.T, name, target string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: name, Method: zip.Store}
	h.SetMode(os.ModeSymlink | 0o777)
	f, err := w.CreateHeader(h)
	require.NoError(t, err)
	_, err = io.WriteString(f, target)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// zip64End is an archive made only of end records whose zip64 record declares n members.
func zip64End(n uint64) []byte {
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, 0x06064b50) // zip64 end of central directory, at offset 0
	b = le.AppendUint64(b, 44)
	b = le.AppendUint16(b, 45)
	b = le.AppendUint16(b, 45)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, n)
	b = le.AppendUint64(b, n)
	b = le.AppendUint64(b, 0)
	b = le.AppendUint64(b, 0)
	b = le.AppendUint32(b, 0x07064b50) // zip64 locator
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, 0)
	b = le.AppendUint32(b, 1)
	b = le.AppendUint32(b, 0x06054b50) // end of central directory, pointing at zip64
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0xffff)
	b = le.AppendUint16(b, 0xffff)
	b = le.AppendUint32(b, 0xffffffff)
	b = le.AppendUint32(b, 0xffffffff)
	b = le.AppendUint16(b, 0)
	return b
}
