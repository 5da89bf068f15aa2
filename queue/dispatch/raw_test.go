package dispatch

import (
	"strconv"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"
)

// rawPeer is a hand-driven worker: a DEALER and a PUSH socket speaking the protocol frame by
// frame, for saboteurs, torturers and late results.
type rawPeer struct {
	t        *testing.T
	identity string
	dealer   *zmq.Socket
	push     *zmq.Socket
	e        *env
}

func newRawPeer(t *testing.T, e *env, identity string) *rawPeer {
	t.Helper()
	p := &rawPeer{t: t, identity: identity, e: e}
	var err error
	p.dealer, err = zmq.NewSocket(zmq.DEALER)
	require.NoError(t, err)
	require.NoError(t, p.dealer.SetLinger(0))
	require.NoError(t, p.dealer.SetIdentity(identity))
	require.NoError(t, p.dealer.SetRcvtimeo(10*time.Second))
	require.NoError(t, p.dealer.Connect(e.vent))
	p.push, err = zmq.NewSocket(zmq.PUSH)
	require.NoError(t, err)
	require.NoError(t, p.push.SetLinger(2*time.Second))
	require.NoError(t, p.push.Connect(e.sink))
	t.Cleanup(p.close)
	return p
}

func (p *rawPeer) close() {
	if p.dealer != nil {
		p.dealer.Close()
		p.dealer = nil
	}
	if p.push != nil {
		p.push.Close()
		p.push = nil
	}
}

// lease requests a task and returns its id (0 for no work) and payload.
func (p *rawPeer) lease(service string) (int64, []byte) {
	p.t.Helper()
	_, err := p.dealer.Send(service, 0)
	require.NoError(p.t, err)
	msg, err := p.dealer.RecvMessageBytes(0)
	require.NoError(p.t, err, "a reply to %s", p.identity)
	require.GreaterOrEqual(p.t, len(msg), 2)
	id, err := strconv.ParseInt(string(msg[0]), 10, 64)
	require.NoError(p.t, err)
	var payload []byte
	for _, f := range msg[1:] {
		payload = append(payload, f...)
	}
	if id > 0 {
		p.waitAttributed(id)
	}
	return id, payload
}

// waitAttributed waits until the hand-out of task id is attributed (its row in flight), so a
// test that moves the clock next moves the lease's, not its reservation's.
func (p *rawPeer) waitAttributed(id int64) {
	p.t.Helper()
	require.Eventually(p.t, func() bool {
		var n int
		err := p.e.pool.QueryRow(p.e.ctx, `SELECT count(*) FROM dispatch WHERE task_id = $1 AND state = 'in_flight'`, id).Scan(&n)
		return err == nil && n == 1
	}, 10*time.Second, 2*time.Millisecond, "task %d attributed", id)
}

// result pushes a result for task id.
func (p *rawPeer) result(service string, id int64, data []byte) {
	p.t.Helper()
	_, err := p.push.SendMessage(p.identity, service, strconv.FormatInt(id, 10), data)
	require.NoError(p.t, err)
}
