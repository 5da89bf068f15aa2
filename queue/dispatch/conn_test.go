package dispatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
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
	require.NotEmpty(t, md.peerAddr, "Peer-Address")
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

	t.Run("SilentConnectionsAfterTheHandshakeAreClosedByHeartbeats", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, func(_ *lease.Config, d *Config) {
			d.HeartbeatInterval, d.HeartbeatTimeout = 200*time.Millisecond, 600*time.Millisecond
		})
		var conns []net.Conn
		for i := range 10 {
			ep, socketType := e.vent, "DEALER"
			if i%2 == 1 {
				ep, socketType = e.sink, "PUSH"
			}
			conns = append(conns, nullHandshake(t, tcpAddr(t, ep), socketType))
		}
		// Each connection, once silent, is closed by the replica: its PINGs go unanswered.
		for _, c := range conns {
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			_, err := io.Copy(io.Discard, c)
			if err != nil {
				require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "a silent connection is still open")
			}
		}
		// Real workers, whose libzmq answers the PINGs, are served all along.
		ids := e.stage(5, 1000)
		e.echoAll(2, false, ids)
	})
}

// nullHandshake opens a TCP connection to addr and completes a ZMTP 3.0 NULL handshake as a
// socketType peer, then reads nothing more.
func nullHandshake(t *testing.T, addr, socketType string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	// READY: a short command frame, its name, then the Socket-Type property.
	body := append([]byte{5}, "READY"...)
	body = append(body, byte(len("Socket-Type")))
	body = append(body, "Socket-Type"...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(socketType)))
	body = append(body, socketType...)
	_, err = c.Write(append(greeting("NULL"), append([]byte{0x04, byte(len(body))}, body...)...))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	head := make([]byte, 64+2)
	_, err = io.ReadFull(c, head) // the replica's greeting and its READY's frame header
	require.NoError(t, err)
	require.Equal(t, byte(0x04), head[64], "a command frame")
	_, err = io.ReadFull(c, make([]byte, head[65]))
	require.NoError(t, err)
	return c
}

// Not parallel: it lowers the process's file descriptor limit for a moment. The server watches
// the descriptors itself too (Server.maintain, as it starts and every fdsWatch), so the gauges
// are read while the limit is still low: a watch of its own after the limit is restored would
// set them back.
func TestFileDescriptorsRunningLowAreWarnedAbout(t *testing.T) {
	var logs logBuffer
	e := newEnv(t, withLogs(&logs))
	e.server.upkeep.watchFDs()
	require.NotContains(t, logs.String(), "file descriptors running low")
	open, limit, err := openFDs()
	require.NoError(t, err)
	require.Equal(t, float64(limit), gaugeValue(e.server.metrics.fdsLimit))

	var rl unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &rl))
	low := rl
	low.Cur = uint64(open + 5)
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &low))
	e.server.upkeep.watchFDs()
	lowLimit, lowOpen := gaugeValue(e.server.metrics.fdsLimit), gaugeValue(e.server.metrics.fdsOpen)
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &rl))

	require.Contains(t, logs.String(), "file descriptors running low")
	require.Equal(t, float64(open+5), lowLimit)
	require.InDelta(t, float64(open), lowOpen, 3)
}

// gaugeValue reads a gauge.
func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}
