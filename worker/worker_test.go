package worker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cortexq/cortexq/queue/wire"
	"github.com/cortexq/cortexq/worker"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// request is one request the fake ventilator received.
type request struct {
	n        int
	identity string
	service  string
	at       time.Time
}

// answerFunc decides the fake ventilator's reply to its n-th request (from 1); nil means no
// reply at all.
type answerFunc func(req request) [][]byte

// fakeVentilator is a ROUTER on 127.0.0.1 speaking the ventilator's side of the protocol.
type fakeVentilator struct {
	endpoint string
	requests chan request
}

// fakeSink is a PULL on 127.0.0.1 collecting result messages.
type fakeSink struct {
	endpoint string
	results  chan [][]byte
}

// serve runs body on a goroutine that owns a socket of type t bound to 127.0.0.1, until the
// test ends. It returns the bound endpoint.
func serve(t *testing.T, typ zmq.Type, setup func(*zmq.Socket) error, body func(s *zmq.Socket)) string {
	t.Helper()
	stop := make(chan struct{})
	ready := make(chan any, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		zctx, err := zmq.NewContext()
		if err != nil {
			ready <- err
			return
		}
		defer zctx.Term()
		s, err := zctx.NewSocket(typ)
		if err != nil {
			ready <- err
			return
		}
		defer s.Close()
		for _, step := range []func() error{
			func() error { return s.SetLinger(0) },
			func() error { return s.SetRcvtimeo(20 * time.Millisecond) },
			func() error { return s.SetSndtimeo(time.Second) },
			func() error { return setup(s) },
			func() error { return s.Bind("tcp://127.0.0.1:*") },
		} {
			if err := step(); err != nil {
				ready <- err
				return
			}
		}
		endpoint, err := s.GetLastEndpoint()
		if err != nil {
			ready <- err
			return
		}
		ready <- endpoint
		for {
			select {
			case <-stop:
				return
			default:
			}
			body(s)
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	switch v := (<-ready).(type) {
	case string:
		return v
	default:
		t.Fatalf("fake socket: %v", v)
		return ""
	}
}

func recvMessage(s *zmq.Socket) [][]byte {
	msg, err := s.RecvMessageBytes(0)
	if err != nil {
		if zmq.AsErrno(err) != zmq.Errno(syscall.EAGAIN) {
			panic(err)
		}
		return nil
	}
	return msg
}

func newFakeVentilator(t *testing.T, answer answerFunc) *fakeVentilator {
	t.Helper()
	v := &fakeVentilator{requests: make(chan request, 1000)}
	n := 0
	v.endpoint = serve(t, zmq.ROUTER, func(s *zmq.Socket) error {
		if err := s.SetRouterHandover(true); err != nil {
			return err
		}
		return s.SetRouterMandatory(1)
	}, func(s *zmq.Socket) {
		msg := recvMessage(s)
		if msg == nil {
			return
		}
		identity, service, err := wire.ParseRequest(msg)
		if err != nil {
			panic(fmt.Sprintf("fake ventilator: %v", err))
		}
		n++
		req := request{n: n, identity: string(identity), service: service, at: time.Now()}
		v.requests <- req
		reply := answer(req)
		if reply == nil {
			return
		}
		if _, err := s.SendBytes(identity, zmq.SNDMORE); err != nil {
			return // the worker left: nothing to answer
		}
		for i, f := range reply {
			flags := zmq.SNDMORE
			if i == len(reply)-1 {
				flags = 0
			}
			if _, err := s.SendBytes(f, flags); err != nil {
				panic(err)
			}
		}
	})
	return v
}

func newFakeSink(t *testing.T) *fakeSink {
	t.Helper()
	k := &fakeSink{results: make(chan [][]byte, 1000)}
	k.endpoint = serve(t, zmq.PULL, func(*zmq.Socket) error { return nil }, func(s *zmq.Socket) {
		if msg := recvMessage(s); msg != nil {
			k.results <- msg
		}
	})
	return k
}

// next returns the next item of ch, failing the test after a while.
func next[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting")
		panic("unreachable")
	}
}

// none checks that ch holds nothing more.
func none[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %v", v)
	default:
	}
}

// taskReply is the ventilator's reply carrying task id and payload, chunked as the protocol
// says.
func taskReply(id int64, payload []byte) [][]byte {
	frames := [][]byte{wire.FormatTaskID(id)}
	err := wire.NewChunker(wire.MessageSize).WriteChunks(bytes.NewReader(payload), func(f []byte, _ bool) error {
		frames = append(frames, bytes.Clone(f))
		return nil
	})
	if err != nil {
		panic(err)
	}
	return frames
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func sizes(frames [][]byte) []int {
	out := make([]int, len(frames))
	for i, f := range frames {
		out[i] = len(f)
	}
	return out
}

// config returns a Config for the fakes with short timings.
func config(t *testing.T, v *fakeVentilator, k *fakeSink) worker.Config {
	return worker.Config{
		Ventilator: v.endpoint,
		Sink:       k.endpoint,
		Service:    "echo",
		Identity:   "test:echo:1",
		Throttle:   20 * time.Millisecond,
		IOTimeout:  5 * time.Second,
		Backoff:    10 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		TempDir:    t.TempDir(),
		Stats:      new(worker.Stats),
	}
}

// start runs the worker until the test ends and returns Run's result channel.
func start(t *testing.T, ctx context.Context, cfg worker.Config, h worker.Handler) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	stopped := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(stopped)
		done <- worker.Run(ctx, cfg, h)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Error("worker did not stop")
		}
	})
	return done
}

func requireEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "scratch files left behind")
}

func TestEchoReturnsTheTaskInChunks(t *testing.T) {
	tests := []struct {
		name        string
		size        int
		inFrames    []int
		resultSizes []int
	}{
		{name: "LastChunkShorter", size: 250000, inFrames: []int{100000, 100000, 50000}, resultSizes: []int{100000, 100000, 50000}},
		{name: "ExactMultipleEndsWithEmptyFrame", size: 200000, inFrames: []int{100000, 100000, 0}, resultSizes: []int{100000, 100000, 0}},
		{name: "SmallTask", size: 5, inFrames: []int{5}, resultSizes: []int{5}},
		{name: "EmptyTaskGivesOneEmptyFrame", size: 0, inFrames: []int{0}, resultSizes: []int{0}},
	}
	// Echo works in memory (MemoryHandler); the same echo as a plain Handler goes through
	// scratch files, and a payload over the memory limit spills from memory to them.
	paths := []struct {
		name      string
		h         worker.Handler
		memoryMax int
	}{
		{"InMemory", worker.Echo{}, 0},
		{"ScratchFiles", worker.HandlerFunc(worker.Echo{}.Convert), 0},
		{"SpilledFromMemory", worker.Echo{}, 1},
	}
	for _, tt := range tests {
		for _, path := range paths {
			t.Run(tt.name+"/"+path.name, func(t *testing.T) {
				t.Parallel()
				payload := randomBytes(tt.size)
				reply := taskReply(42, payload)
				require.Equal(t, tt.inFrames, sizes(reply[1:]))
				v := newFakeVentilator(t, func(req request) [][]byte {
					if req.n == 1 {
						return reply
					}
					return mockReply()
				})
				k := newFakeSink(t)
				cfg := config(t, v, k)
				cfg.Count = 1
				cfg.MemoryPayloadMax = path.memoryMax

				require.NoError(t, next(t, start(t, t.Context(), cfg, path.h)))

				msg := next(t, k.results)
				require.Equal(t, "test:echo:1", string(msg[0]))
				require.Equal(t, "echo", string(msg[1]))
				require.Equal(t, "42", string(msg[2]))
				require.Equal(t, tt.resultSizes, sizes(msg[3:]))
				require.True(t, bytes.Equal(payload, bytes.Join(msg[3:], nil)), "echo is byte-identical")
				res, err := wire.ParseResult(msg)
				require.NoError(t, err)
				require.Equal(t, int64(42), res.TaskID)
				require.Equal(t, int64(tt.size), res.Size)

				req := next(t, v.requests)
				require.Equal(t, request{n: 1, identity: "test:echo:1", service: "echo", at: req.at}, req)
				none(t, v.requests)
				none(t, k.results)
				require.Equal(t, uint64(1), cfg.Stats.Tasks.Load())
				require.Equal(t, uint64(1), cfg.Stats.Pushed.Load())
				require.Equal(t, uint64(0), cfg.Stats.Failed.Load())
				requireEmptyDir(t, cfg.TempDir)
			})
		}
	}
}

func TestMockReplyThrottlesThenRequestsAgain(t *testing.T) {
	t.Parallel()
	v := newFakeVentilator(t, func(req request) [][]byte {
		if req.n <= 2 {
			return mockReply()
		}
		return taskReply(7, []byte("payload"))
	})
	k := newFakeSink(t)
	cfg := config(t, v, k)
	cfg.Count = 1
	cfg.Throttle = 150 * time.Millisecond

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))

	reqs := []request{next(t, v.requests), next(t, v.requests), next(t, v.requests)}
	none(t, v.requests)
	for i := 1; i < len(reqs); i++ {
		require.GreaterOrEqual(t, reqs[i].at.Sub(reqs[i-1].at), cfg.Throttle, "request %d came before the throttle ran out", i+1)
	}
	msg := next(t, k.results)
	require.Equal(t, "7", string(msg[2]))
	require.Equal(t, "payload", string(bytes.Join(msg[3:], nil)))
	none(t, k.results) // a mock reply is never answered on the sink
	require.Equal(t, uint64(2), cfg.Stats.Mocks.Load())
	require.Equal(t, uint64(3), cfg.Stats.Requests.Load())
}

func TestLegacyMockTaskIDIsNoWork(t *testing.T) {
	t.Parallel()
	v := newFakeVentilator(t, func(req request) [][]byte {
		if req.n == 1 {
			return [][]byte{[]byte("-1"), {}}
		}
		return taskReply(8, []byte("x"))
	})
	k := newFakeSink(t)
	cfg := config(t, v, k)
	cfg.Count = 1

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))
	require.Equal(t, "8", string(next(t, k.results)[2]))
	require.Equal(t, uint64(1), cfg.Stats.Mocks.Load())
}

func TestCountStopsTheWorker(t *testing.T) {
	t.Parallel()
	v := newFakeVentilator(t, func(req request) [][]byte {
		return taskReply(int64(req.n), []byte("task "+strconv.Itoa(req.n)))
	})
	k := newFakeSink(t)
	cfg := config(t, v, k)
	cfg.Count = 3

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))

	for i := 1; i <= 3; i++ {
		msg := next(t, k.results)
		require.Equal(t, strconv.Itoa(i), string(msg[2]))
		require.Equal(t, "task "+strconv.Itoa(i), string(bytes.Join(msg[3:], nil)))
		require.Equal(t, i, next(t, v.requests).n)
	}
	none(t, v.requests)
	none(t, k.results)
	require.Equal(t, uint64(3), cfg.Stats.Tasks.Load())
}

func TestCountIsSharedByConcurrentLoops(t *testing.T) {
	t.Parallel()
	v := newFakeVentilator(t, func(req request) [][]byte {
		return taskReply(int64(req.n), []byte("x"))
	})
	k := newFakeSink(t)
	cfg := config(t, v, k)
	cfg.Count = 5
	cfg.Concurrency = 3

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))
	for range 5 {
		next(t, k.results)
		next(t, v.requests)
	}
	none(t, v.requests)
	none(t, k.results)
	require.Equal(t, uint64(5), cfg.Stats.Tasks.Load())
}

func TestConcurrencyGivesDistinctIdentities(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	served := map[string]bool{}
	v := newFakeVentilator(t, func(req request) [][]byte {
		mu.Lock()
		defer mu.Unlock()
		if served[req.identity] {
			return mockReply()
		}
		served[req.identity] = true
		return taskReply(int64(req.n), []byte(req.identity))
	})
	k := newFakeSink(t)
	cfg := config(t, v, k)
	cfg.Identity = "" // the default: <host>:<service>:<pid>-NN
	cfg.Concurrency = 3

	done := start(t, t.Context(), cfg, worker.Echo{})

	host, err := os.Hostname()
	require.NoError(t, err)
	var want []string
	for i := 1; i <= 3; i++ {
		want = append(want, fmt.Sprintf("%s:echo:%d-%02d", host, os.Getpid(), i))
	}
	var identities, payloads []string
	for range 3 {
		msg := next(t, k.results)
		identities = append(identities, string(msg[0]))
		payloads = append(payloads, string(bytes.Join(msg[3:], nil)))
	}
	slices.Sort(identities)
	slices.Sort(payloads)
	require.Equal(t, want, identities, "sink identity frames")
	require.Equal(t, want, payloads, "routing identities seen by the ventilator")
	none(t, done) // still running: Count is 0
}

func TestCancelReturnsPromptly(t *testing.T) {
	t.Run("WhileWaitingForAReply", func(t *testing.T) {
		t.Parallel()
		v := newFakeVentilator(t, func(request) [][]byte { return nil })
		k := newFakeSink(t)
		cfg := config(t, v, k)
		cfg.IOTimeout = worker.IOTimeoutDefault
		cfg.Concurrency = 2
		ctx, cancel := context.WithCancel(t.Context())
		done := start(t, ctx, cfg, worker.Echo{})
		next(t, v.requests)
		next(t, v.requests)

		cancel()
		requireReturnsWithin(t, done, 2*time.Second)
	})
	t.Run("WhileThrottled", func(t *testing.T) {
		t.Parallel()
		v := newFakeVentilator(t, func(request) [][]byte { return mockReply() })
		k := newFakeSink(t)
		cfg := config(t, v, k)
		cfg.Throttle = worker.ThrottleDefault
		ctx, cancel := context.WithCancel(t.Context())
		done := start(t, ctx, cfg, worker.Echo{})
		next(t, v.requests)
		require.Eventually(t, func() bool { return cfg.Stats.Mocks.Load() == 1 }, 5*time.Second, 5*time.Millisecond)

		cancel()
		requireReturnsWithin(t, done, 2*time.Second)
	})
	t.Run("WhileConverting", func(t *testing.T) {
		t.Parallel()
		v := newFakeVentilator(t, func(req request) [][]byte { return taskReply(3, []byte("x")) })
		k := newFakeSink(t)
		cfg := config(t, v, k)
		ctx, cancel := context.WithCancel(t.Context())
		converting := make(chan struct{})
		done := start(t, ctx, cfg, worker.HandlerFunc(func(ctx context.Context, in, out string) error {
			close(converting)
			<-ctx.Done()
			return ctx.Err()
		}))
		next(t, converting)

		cancel()
		requireReturnsWithin(t, done, 2*time.Second)
		none(t, k.results) // an abandoned task is left to the dispatcher's reaper
		requireEmptyDir(t, cfg.TempDir)
	})
	t.Run("WithNoVentilatorListening", func(t *testing.T) {
		t.Parallel()
		cfg := worker.Config{
			Ventilator: "tcp://127.0.0.1:1", // nothing listens: libzmq keeps reconnecting
			Sink:       "tcp://127.0.0.1:1",
			Service:    "echo",
			TempDir:    t.TempDir(),
			Logger:     slog.New(slog.DiscardHandler),
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := start(t, ctx, cfg, worker.Echo{})
		time.Sleep(200 * time.Millisecond)

		cancel()
		requireReturnsWithin(t, done, 2*time.Second)
	})
}

func requireReturnsWithin(t *testing.T, done <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(d):
		t.Fatalf("Run did not return within %s of cancel", d)
	}
}

func TestIOTimeoutRebuildsTheSocket(t *testing.T) {
	t.Parallel()
	v := newFakeVentilator(t, func(req request) [][]byte {
		if req.n <= 2 {
			return nil // silent: the worker must time out and start afresh
		}
		return taskReply(77, []byte("late but fine"))
	})
	k := newFakeSink(t)
	cfg := config(t, v, k)
	cfg.IOTimeout = 300 * time.Millisecond
	cfg.Count = 1

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))

	msg := next(t, k.results)
	require.Equal(t, "77", string(msg[2]))
	require.Equal(t, "late but fine", string(bytes.Join(msg[3:], nil)))
	for i := 1; i <= 3; i++ {
		req := next(t, v.requests)
		require.Equal(t, "test:echo:1", req.identity, "a rebuilt socket keeps its identity")
	}
	require.Equal(t, uint64(2), cfg.Stats.Rebuilds.Load())
	require.Equal(t, uint64(3), cfg.Stats.Requests.Load())
}

func TestConvertErrorSendsAnEmptyResult(t *testing.T) {
	t.Parallel()
	v := newFakeVentilator(t, func(req request) [][]byte {
		return taskReply(int64(req.n), randomBytes(150000))
	})
	k := newFakeSink(t)
	cfg := config(t, v, k)
	cfg.Count = 2
	var inputs []string
	h := worker.HandlerFunc(func(ctx context.Context, in, out string) error {
		inputs = append(inputs, in)
		if len(inputs) == 1 {
			return errors.New("latexml exploded")
		}
		return nil // and writes no output: also an empty result
	})

	require.NoError(t, next(t, start(t, t.Context(), cfg, h)))

	for i := 1; i <= 2; i++ {
		msg := next(t, k.results)
		require.Equal(t, [][]byte{[]byte("test:echo:1"), []byte("echo"), []byte(strconv.Itoa(i)), {}}, msg)
	}
	require.Equal(t, uint64(2), cfg.Stats.Failed.Load())
	require.Len(t, inputs, 2)
	require.Equal(t, "1.zip", inputs[0][len(inputs[0])-5:])
	requireEmptyDir(t, cfg.TempDir)
}

func TestUnreadableTaskIDIsDiscarded(t *testing.T) {
	t.Parallel()
	v := newFakeVentilator(t, func(req request) [][]byte {
		switch req.n {
		case 1:
			return [][]byte{[]byte("../../etc/passwd"), []byte("boom")}
		case 2:
			return [][]byte{[]byte("12abc")}
		default:
			return taskReply(9, []byte("ok"))
		}
	})
	k := newFakeSink(t)
	cfg := config(t, v, k)
	cfg.Count = 1

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))

	msg := next(t, k.results)
	require.Equal(t, "9", string(msg[2]))
	none(t, k.results)
	require.Equal(t, uint64(2), cfg.Stats.BadReplies.Load())
	require.Equal(t, uint64(1), cfg.Stats.Tasks.Load())
	requireEmptyDir(t, cfg.TempDir)
}

func TestRunRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*worker.Config)
	}{
		{name: "NoService", edit: func(c *worker.Config) { c.Service = "" }},
		{name: "ServiceWithSlash", edit: func(c *worker.Config) { c.Service = "a/b" }},
		{name: "NegativeCount", edit: func(c *worker.Config) { c.Count = -1 }},
		{name: "NegativeConcurrency", edit: func(c *worker.Config) { c.Concurrency = -2 }},
		{name: "IdentityWithNUL", edit: func(c *worker.Config) { c.Identity = "a\x00b" }},
		{name: "IdentityTooLong", edit: func(c *worker.Config) { c.Identity = string(bytes.Repeat([]byte("w"), 300)) }},
		{name: "BadVentilatorEndpoint", edit: func(c *worker.Config) { c.Ventilator = "nonsense" }},
		{name: "BadSinkEndpoint", edit: func(c *worker.Config) { c.Sink = "tcp://" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := worker.Config{
				Ventilator: "tcp://127.0.0.1:1",
				Sink:       "tcp://127.0.0.1:1",
				Service:    "echo",
				Logger:     slog.New(slog.DiscardHandler),
			}
			tt.edit(&cfg)
			err := worker.Run(t.Context(), cfg, worker.Echo{})
			require.Error(t, err)
		})
	}
	require.Error(t, worker.Run(t.Context(), worker.Config{Service: "echo"}, nil))
}

func TestEchoCopiesTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := dir+"/in.zip", dir+"/out.zip"
	payload := randomBytes(300001)
	require.NoError(t, os.WriteFile(in, payload, 0o600))
	require.NoError(t, worker.Echo{}.Convert(t.Context(), in, out))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(payload, got))

	require.Error(t, worker.Echo{}.Convert(t.Context(), dir+"/missing.zip", out))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, worker.Echo{}.Convert(ctx, in, out), context.Canceled)
}

// With as many sinks as ventilators, each result goes back to the replica that handed its task
// out, and the requests take turns over the replicas.
func TestPairedEndpointsReturnResultsToTheHandingReplica(t *testing.T) {
	t.Parallel()
	const replicas, tasks = 3, 30
	var vents []*fakeVentilator
	var sinks []*fakeSink
	var ventEPs, sinkEPs []string
	for r := range replicas {
		// Replica r hands out task ids r, r+replicas, r+2·replicas, ...
		v := newFakeVentilator(t, func(req request) [][]byte {
			id := int64(r + replicas*(req.n-1))
			return taskReply(id, []byte("from replica "+strconv.Itoa(r)))
		})
		k := newFakeSink(t)
		vents, sinks = append(vents, v), append(sinks, k)
		ventEPs, sinkEPs = append(ventEPs, v.endpoint), append(sinkEPs, k.endpoint)
	}
	cfg := config(t, vents[0], sinks[0])
	cfg.Ventilator = strings.Join(ventEPs, ", ")
	cfg.Sink = strings.Join(sinkEPs, ",")
	cfg.Count = tasks

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))
	// Run returned after the last result was pushed; wait for them all to arrive.
	require.Eventually(t, func() bool {
		n := 0
		for _, k := range sinks {
			n += len(k.results)
		}
		return n == tasks
	}, 10*time.Second, 10*time.Millisecond)
	for r, k := range sinks {
		for len(k.results) > 0 {
			msg := <-k.results
			id, err := strconv.Atoi(string(msg[2]))
			require.NoError(t, err)
			require.Equal(t, r, id%replicas, "task %d's result reached replica %d", id, r)
			require.Equal(t, "from replica "+strconv.Itoa(r), string(bytes.Join(msg[3:], nil)))
		}
	}
	for r, v := range vents {
		// Requests take turns over the replicas; one whose socket is not yet connected is
		// skipped, so the shares may differ a little.
		require.GreaterOrEqual(t, len(v.requests), tasks/replicas/2, "replica %d's share of the requests", r)
	}
}

// With a different number of ventilators and sinks there is no pairing: every result still
// arrives, at one of the sinks.
func TestUnpairedEndpointsStillDeliver(t *testing.T) {
	t.Parallel()
	v := newFakeVentilator(t, func(req request) [][]byte {
		return taskReply(int64(req.n), []byte("x"))
	})
	k1, k2 := newFakeSink(t), newFakeSink(t)
	cfg := config(t, v, k1)
	cfg.AnySink = true
	cfg.Sink = k1.endpoint + "," + k2.endpoint
	cfg.Count = 10

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))
	require.Eventually(t, func() bool { return len(k1.results)+len(k2.results) == 10 },
		10*time.Second, 10*time.Millisecond)
	require.NotEmpty(t, k1.results, "libzmq round-robins over both sinks")
	require.NotEmpty(t, k2.results, "libzmq round-robins over both sinks")
}

// mockReply returns the frames of a "no work" reply, ["0", ""].
func mockReply() [][]byte { return [][]byte{[]byte(wire.MockTaskID), {}} }

// A replica that takes requests and never answers (frozen, say) costs a worker with other
// replicas one I/O timeout, not a pause too: the others are asked meanwhile, and the silent one
// again only once its pause (here far longer than the test) is over.
func TestASilentReplicaRestsWhileTheOthersAreAsked(t *testing.T) {
	t.Parallel()
	silent := newFakeVentilator(t, func(request) [][]byte { return nil })
	live := newFakeVentilator(t, func(req request) [][]byte { return taskReply(int64(req.n), []byte("x")) })
	k1, k2 := newFakeSink(t), newFakeSink(t)
	cfg := config(t, silent, k1)
	cfg.Ventilator = silent.endpoint + "," + live.endpoint
	cfg.Sink = k1.endpoint + "," + k2.endpoint
	cfg.IOTimeout = 300 * time.Millisecond
	cfg.Backoff = time.Hour
	const tasks = 20
	cfg.Count = tasks

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))
	require.Eventually(t, func() bool { return len(k2.results) == tasks }, 10*time.Second, 10*time.Millisecond)
	require.Empty(t, k1.results)
	require.Equal(t, uint64(1), cfg.Stats.Rebuilds.Load(), "one timeout on the silent replica, then it rests")
	require.Len(t, silent.requests, 1, "asked once, then left to rest")
	require.Len(t, live.requests, tasks)
}

// A task's result goes to another replica's sink when the sink of the replica that handed it out
// has no replica connected (killed, and not yet back): at once, not after IOTimeout (here an
// hour), since any replica accepts any result.
func TestAResultGoesToAnotherSinkWhenItsOwnIsDown(t *testing.T) {
	t.Parallel()
	handing := newFakeVentilator(t, func(req request) [][]byte { return taskReply(int64(req.n), []byte("a")) })
	other := newFakeVentilator(t, func(req request) [][]byte { return taskReply(int64(1000+req.n), []byte("b")) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "tcp://" + ln.Addr().String() // a sink whose replica is gone: nothing listens there
	require.NoError(t, ln.Close())
	k := newFakeSink(t)
	cfg := config(t, handing, k)
	cfg.Ventilator = handing.endpoint + "," + other.endpoint
	cfg.Sink = down + "," + k.endpoint
	cfg.IOTimeout = time.Hour
	const tasks = 10
	cfg.Count = tasks

	require.NoError(t, next(t, start(t, t.Context(), cfg, worker.Echo{})))
	require.Eventually(t, func() bool { return len(k.results) == tasks }, 10*time.Second, 10*time.Millisecond)
	fromHanding := 0
	for range tasks {
		msg := <-k.results
		if id, err := strconv.Atoi(string(msg[2])); err == nil && id < 1000 {
			fromHanding++
			require.Equal(t, "a", string(bytes.Join(msg[3:], nil)))
		}
	}
	require.Positive(t, fromHanding, "the handing replica's tasks were worked")
	require.Equal(t, uint64(fromHanding), cfg.Stats.Redirected.Load())
}
