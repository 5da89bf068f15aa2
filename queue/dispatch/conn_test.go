package dispatch

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/wire"
)

// Connections and frames: what a peer can make a replica hold.

// pushPull is a PULL socket bound on loopback and a PUSH socket connected to it.
func pushPull(t *testing.T) (push, pull *zmq.Socket) {
	t.Helper()
	var err error
	pull, err = zmq.NewSocket(zmq.PULL)
	require.NoError(t, err)
	t.Cleanup(func() { pull.Close() })
	require.NoError(t, pull.SetLinger(0))
	require.NoError(t, pull.Bind("tcp://127.0.0.1:*"))
	push, err = zmq.NewSocket(zmq.PUSH)
	require.NoError(t, err)
	t.Cleanup(func() { push.Close() })
	require.NoError(t, push.SetLinger(0))
	require.NoError(t, push.Connect(lastEndpoint(pull)))
	return push, pull
}

// Not parallel: it measures the heap allocations of one receive.
func TestRecvLimitedNeverCopiesAnOversizedHeader(t *testing.T) {
	push, pull := pushPull(t)
	huge := bytes.Repeat([]byte("i"), 32<<20)
	_, err := push.SendMessage(huge, "echo", "7", "data")
	require.NoError(t, err)
	poller := zmq.NewPoller()
	poller.Add(pull, zmq.POLLIN)
	polled, err := poller.Poll(10 * time.Second)
	require.NoError(t, err)
	require.Len(t, polled, 1, "the message arrived")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	msg, md, err := recvLimited(pull, 0, frameLimits{headers: 3, body: 1 << 20})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Equal(t, wire.ReasonHeaderTooLarge, wire.ReasonOf(msg.err))
	require.Equal(t, [][]byte{nil, []byte("echo"), []byte("7"), []byte("data")}, msg.frames)
	require.Contains(t, md, "Peer-Address")
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("receiving a 32 MiB header frame allocated %d bytes", allocated)
	require.Less(t, allocated, uint64(1<<20), "the oversized header was not copied")

	// Data frames past the body limit are not copied either; small ones are.
	_, err = push.SendMessage("w", "echo", "7", "ok", bytes.Repeat([]byte("d"), 8<<20), "late")
	require.NoError(t, err)
	_, err = poller.Poll(10 * time.Second)
	require.NoError(t, err)
	runtime.ReadMemStats(&before)
	msg, _, err = recvLimited(pull, 0, frameLimits{headers: 3, body: 1 << 20})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.NoError(t, msg.err)
	require.Equal(t, [][]byte{[]byte("w"), []byte("echo"), []byte("7"), []byte("ok")}, msg.frames)
	require.Equal(t, 2, msg.droppedFrames)
	require.Equal(t, int64(8<<20+4), msg.droppedBytes)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "dropped frames were not copied")
}

func TestConnections(t *testing.T) {
	t.Run("AResultWithAHugeHeaderFrameIsDiscardedWithAReason", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(1, 1000)
		p := newRawPeer(t, e, "header")
		id, payload := p.lease("echo")
		require.Equal(t, ids[0], id)
		for _, frames := range [][]any{
			{bytes.Repeat([]byte("i"), 1<<20), "echo", strconv.FormatInt(id, 10), payload},
			{"header", bytes.Repeat([]byte("s"), 1<<20), strconv.FormatInt(id, 10), payload},
			{"header", "echo", bytes.Repeat([]byte("1"), 1<<20), payload},
		} {
			_, err := p.push.SendMessage(frames...)
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return e.discarded("sink", wire.ReasonHeaderTooLarge) == 3 },
			10*time.Second, 20*time.Millisecond)
		require.Equal(t, queue.StatusDispatched, e.status(id), "nothing was recorded")
		// A request whose service frame is too large gets no work at once.
		_, err := p.dealer.SendBytes(bytes.Repeat([]byte("s"), 4096), 0)
		require.NoError(t, err)
		reply, err := p.dealer.RecvMessageBytes(0)
		require.NoError(t, err)
		require.Equal(t, wire.MockTaskID, string(reply[0]))
		require.Equal(t, 1.0, e.discarded("ventilator", wire.ReasonHeaderTooLarge))
		// The worker's honest result is then taken.
		p.result("echo", id, payload)
		e.waitStatus(id, queue.StatusNoProblem)
	})
}
