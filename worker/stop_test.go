package worker_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/wire"
	"github.com/cortexq/cortexq/worker"
)

// stopBudget is how long a stopping worker with no task in hand may take to return. The worker
// aims at a second (stopReplyWait); the budget is generous for a loaded machine, and far below
// what the states tested below took before (IOTimeout, 2 min by default, or a whole backoff).
const stopBudget = 5 * time.Second

// startStoppable runs the worker like start, with a Stopping channel; stop closes it.
func startStoppable(t *testing.T, cfg worker.Config, h worker.Handler) (done <-chan error, stop func()) {
	t.Helper()
	stopping := make(chan struct{})
	cfg.Stopping = stopping
	return start(t, t.Context(), cfg, h), sync.OnceFunc(func() { close(stopping) })
}

// requireStopsWithin checks that Run returns nil within d of its stop.
func requireStopsWithin(t *testing.T, done <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(d):
		t.Fatalf("Run did not return within %s of the stop", d)
	}
}

// A worker with no task in hand stops at once, whatever it is waiting for; IOTimeout and the
// pauses are long, as a deployment's are, so that only the stop can end the wait in time.
func TestStoppingWithNoTaskInHandReturnsPromptly(t *testing.T) {
	t.Run("AskingForWorkWithNoReplicaConnected", func(t *testing.T) {
		t.Parallel()
		// Nothing listens: the request waits in send for a connected replica (ZMQ_IMMEDIATE).
		cfg := config(t, &fakeVentilator{endpoint: "tcp://127.0.0.1:1"}, &fakeSink{endpoint: "tcp://127.0.0.1:2"})
		cfg.IOTimeout = worker.IOTimeoutDefault
		cfg.Backoff = time.Hour
		done, stop := startStoppable(t, cfg, worker.Echo{})
		time.Sleep(200 * time.Millisecond) // into its send, most likely; any state must stop

		stop()
		requireStopsWithin(t, done, stopBudget)
		require.Zero(t, cfg.Stats.Requests.Load(), "no request ever went out")
	})
	t.Run("WaitingForAReplyThatNeverComes", func(t *testing.T) {
		t.Parallel()
		v := newFakeVentilator(t, func(request) [][]byte { return nil })
		k := newFakeSink(t)
		cfg := config(t, v, k)
		cfg.IOTimeout = worker.IOTimeoutDefault
		done, stop := startStoppable(t, cfg, worker.Echo{})
		next(t, v.requests)

		stop()
		requireStopsWithin(t, done, stopBudget)
		none(t, v.requests)
		none(t, k.results)
		require.Zero(t, cfg.Stats.Rebuilds.Load(), "giving the request up is no transport error")
	})
	t.Run("Throttled", func(t *testing.T) {
		t.Parallel()
		v := newFakeVentilator(t, func(request) [][]byte { return mockReply() })
		k := newFakeSink(t)
		cfg := config(t, v, k)
		cfg.Throttle = worker.ThrottleDefault
		done, stop := startStoppable(t, cfg, worker.Echo{})
		next(t, v.requests)
		require.Eventually(t, func() bool { return cfg.Stats.Mocks.Load() == 1 }, 10*time.Second, 5*time.Millisecond)

		stop()
		requireStopsWithin(t, done, stopBudget)
		none(t, v.requests)
	})
	t.Run("BackingOffAfterATimeout", func(t *testing.T) {
		t.Parallel()
		v := newFakeVentilator(t, func(request) [][]byte { return nil })
		k := newFakeSink(t)
		cfg := config(t, v, k)
		cfg.IOTimeout = 100 * time.Millisecond
		cfg.Backoff = time.Hour
		done, stop := startStoppable(t, cfg, worker.Echo{})
		next(t, v.requests)
		require.Eventually(t, func() bool { return cfg.Stats.Rebuilds.Load() == 1 }, 10*time.Second, 5*time.Millisecond,
			"the reply timed out: the worker now pauses for its backoff")

		stop()
		requireStopsWithin(t, done, stopBudget)
		none(t, v.requests)
	})
}

// standIn is a ROUTER on a fixed loopback endpoint standing in for a replica's ventilator: it
// takes requests and answers each with answer's frames, or with nothing (nil), until killed.
type standIn struct {
	endpoint string
	requests chan string // the identities of the requests, in order
	quit     chan struct{}
	wg       sync.WaitGroup
}

// startStandIn binds a stand-in to endpoint ("tcp://127.0.0.1:0" for any free port).
func startStandIn(t *testing.T, endpoint string, answer [][]byte) *standIn {
	t.Helper()
	zctx, err := zmq.NewContext()
	require.NoError(t, err)
	s, err := zctx.NewSocket(zmq.ROUTER)
	require.NoError(t, err)
	for _, set := range []func() error{
		func() error { return s.SetLinger(0) },
		func() error { return s.SetRcvtimeo(20 * time.Millisecond) },
		func() error { return s.SetRouterMandatory(1) },
		func() error { return s.Bind(endpoint) },
	} {
		require.NoError(t, set())
	}
	r := &standIn{requests: make(chan string, 100), quit: make(chan struct{})}
	r.endpoint, err = s.GetLastEndpoint()
	require.NoError(t, err)
	r.wg.Go(func() {
		defer func() { _ = s.Close(); _ = zctx.Term() }()
		for {
			select {
			case <-r.quit:
				return
			default:
			}
			msg, err := s.RecvMessageBytes(0)
			if err != nil {
				if zmq.AsErrno(err) != zmq.Errno(syscall.EAGAIN) {
					panic(err)
				}
				continue
			}
			r.requests <- string(msg[0])
			if answer != nil {
				_, _ = s.SendMessage(msg[0], answer) // a worker gone meanwhile is no error here
			}
		}
	})
	t.Cleanup(r.kill)
	return r
}

// kill closes the stand-in's socket, as a kill -9 closes a replica's: its connections drop and
// what it was sent is lost.
func (r *standIn) kill() {
	select {
	case <-r.quit:
	default:
		close(r.quit)
	}
	r.wg.Wait()
}

// The case of issue 64: a worker connected to two replicas, one of which was killed (kill -9)
// with the worker's request unanswered and then came back, waits for a reply that will never
// come; a stop must not wait for it.
func TestStoppingGivesUpTheRequestLostWithAKilledReplica(t *testing.T) {
	t.Parallel()
	live := startStandIn(t, "tcp://127.0.0.1:*", [][]byte{[]byte(wire.MockTaskID), {}})
	doomed := startStandIn(t, "tcp://127.0.0.1:*", nil) // takes the request, never answers
	k1, k2 := newFakeSink(t), newFakeSink(t)
	cfg := config(t, &fakeVentilator{endpoint: live.endpoint + "," + doomed.endpoint},
		&fakeSink{endpoint: k1.endpoint + "," + k2.endpoint})
	cfg.IOTimeout = worker.IOTimeoutDefault
	cfg.Throttle = 20 * time.Millisecond
	done, stop := startStoppable(t, cfg, worker.Echo{})
	// Requests take turns over the replicas: the first or second one reaches the doomed one,
	// and the worker then waits for its reply.
	next(t, doomed.requests)

	doomed.kill()
	back := startStandIn(t, doomed.endpoint, [][]byte{[]byte(wire.MockTaskID), {}})
	time.Sleep(300 * time.Millisecond) // the worker reconnects to the replica that came back

	_ = back // the lost request is asked again meanwhile (TestARequestLostWithAKilledReplicaIsAskedAgainAtOnce)

	stop()
	requireStopsWithin(t, done, stopBudget)
	none(t, k1.results)
	none(t, k2.results)
}

// A conversion in hand when the stop comes is finished, under a context that the stop does not
// cancel, and its result sent; no new task is asked for. (The grace that bounds it is the
// command's: cmd/cortexq TestWorkerSIGTERMFinishesTheConversionInHand.)
func TestStoppingFinishesTheConversionInHand(t *testing.T) {
	t.Parallel()
	v := newFakeVentilator(t, func(req request) [][]byte { return taskReply(int64(40+req.n), []byte("in hand")) })
	k := newFakeSink(t)
	cfg := config(t, v, k)
	cfg.IOTimeout = worker.IOTimeoutDefault
	converting, release := make(chan struct{}), make(chan struct{})
	var convertErr error
	done, stop := startStoppable(t, cfg, worker.HandlerFunc(func(ctx context.Context, in, out string) error {
		close(converting)
		<-release
		if convertErr = ctx.Err(); convertErr != nil {
			return convertErr
		}
		return worker.Echo{}.Convert(ctx, in, out)
	}))
	next(t, converting)

	stop()
	none(t, done) // the conversion still runs: Run cannot have returned
	close(release)
	requireStopsWithin(t, done, 10*time.Second)
	require.NoError(t, convertErr, "the stop does not cancel the conversion in hand")
	msg := next(t, k.results)
	require.Equal(t, "41", string(msg[2]))
	require.Equal(t, "in hand", string(msg[3]))
	require.Equal(t, 1, next(t, v.requests).n)
	none(t, v.requests)
	require.Equal(t, uint64(1), cfg.Stats.Pushed.Load())
	require.Zero(t, cfg.Stats.Failed.Load())
	requireEmptyDir(t, cfg.TempDir)
}

// A request taken by a replica that is then killed is asked again at once of another one, when
// its disconnection is seen: not after IOTimeout (here an hour), nor after a backoff.
func TestARequestLostWithAKilledReplicaIsAskedAgainAtOnce(t *testing.T) {
	t.Parallel()
	live := startStandIn(t, "tcp://127.0.0.1:*", [][]byte{[]byte(wire.MockTaskID), {}})
	doomed := startStandIn(t, "tcp://127.0.0.1:*", nil) // takes the request, never answers
	k1, k2 := newFakeSink(t), newFakeSink(t)
	cfg := config(t, &fakeVentilator{endpoint: doomed.endpoint + "," + live.endpoint},
		&fakeSink{endpoint: k1.endpoint + "," + k2.endpoint})
	cfg.IOTimeout = time.Hour
	cfg.Backoff = time.Hour
	cfg.Throttle = 20 * time.Millisecond
	_, stop := startStoppable(t, cfg, worker.Echo{})
	defer stop()
	next(t, doomed.requests)
	for len(live.requests) > 0 { // requests answered before the doomed one took its turn
		<-live.requests
	}

	doomed.kill()
	next(t, live.requests) // within next's wait, far below an hour
	require.Equal(t, uint64(1), cfg.Stats.Lost.Load())
	require.Zero(t, cfg.Stats.Rebuilds.Load(), "no timeout, no backoff")
}
