package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/wire"
)

// A result that cannot be read to its end (an I/O error half way through the file) must not
// reach the dispatcher cut short, looking whole: the loop drops the half-sent message with its
// socket and answers with an empty result, which the dispatcher retries at once.
func TestResultReadErrorSendsAnEmptyResultNotACutOne(t *testing.T) {
	t.Parallel()
	zctx, err := zmq.NewContext()
	require.NoError(t, err)
	pull, err := zctx.NewSocket(zmq.PULL)
	require.NoError(t, err)
	require.NoError(t, pull.SetLinger(0))
	require.NoError(t, pull.SetRcvtimeo(5*time.Second))
	require.NoError(t, pull.Bind("tcp://127.0.0.1:*"))
	endpoint, err := pull.GetLastEndpoint()
	require.NoError(t, err)
	t.Cleanup(func() {
		pull.Close()
		_ = zctx.Term()
	})

	cfg, _, err := Config{Ventilator: "tcp://127.0.0.1:1", Sink: endpoint, Service: "echo", Identity: "w1",
		IOTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}.withDefaults()
	require.NoError(t, err)
	l := newLoop(cfg, nil, "w1", zctx, newBudget(0))
	defer l.close(time.Second)

	// Two and a half chunks' worth of bytes, then a failing disk.
	result := io.MultiReader(strings.NewReader(strings.Repeat("x", 2*wire.MessageSize+500)),
		iotestErr{errors.New("input/output error")})
	l.answer(context.Background(), l.log, []byte("7"), result, nil, 0, time.Now())

	msg, err := pull.RecvMessageBytes(0)
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("w1"), []byte("echo"), []byte("7"), {}}, msg,
		"the first message to arrive is the empty result, never the cut one")
	require.NoError(t, pull.SetRcvtimeo(200*time.Millisecond))
	_, err = pull.RecvMessageBytes(0)
	require.Error(t, err, "nothing else arrives")
	require.Equal(t, uint64(1), cfg.Stats.Failed.Load())
}

type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }
