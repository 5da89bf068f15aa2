package dispatch

import (
	"fmt"
	"math"
	"syscall"

	zmq "github.com/pebbe/zmq4"

	"github.com/cortexq/cortexq/queue/wire"
)

// frameLimits bounds what one received message may hold in this process. libzmq caps each
// frame (ZMQ_MAXMSGSIZE) but not how many frames a message has, and hands a multipart message
// over only once all of it has arrived, so a peer can make a message of any size. Frames past
// the limits are still received (that frees them in libzmq) but never copied out of it, and
// only their sizes are kept: such a message is never held twice.
type frameLimits struct {
	// headers is how many leading frames are kept, each of at most wire.MaxHeaderBytes: a
	// larger one makes the message malformed (wire.ReasonHeaderTooLarge).
	headers int
	// body is how much of the frames after the headers is kept, each frame counted at its
	// length plus frameCost. A frame that would pass it is dropped, and so is every later one.
	body int64
}

// frameCost is what a frame costs in memory beyond its bytes (its slice header, allocation
// rounding), charged against frameLimits.body so that a flood of tiny frames is bounded too.
const frameCost = 64

// message is a received message: its kept frames, what was dropped, and who sent it.
type message struct {
	frames [][]byte
	// droppedBytes and droppedFrames count the frames dropped past the limits.
	droppedBytes  int64
	droppedFrames int
	// err is a *wire.FrameError for a header frame over wire.MaxHeaderBytes (its place in
	// frames is nil).
	err  error
	from peer
}

// recvFrom receives the next message on sock from a sender allowed to send it. Under CURVE
// every message is checked against the allow-list as it stands, because libzmq keeps a revoked
// key's connection open; messages from keys no longer allowed (or with no authenticated key at
// all) are dropped and counted. The budget of dropped messages per call is bounded; then it
// reports EAGAIN like an empty socket.
func (s *core) recvFrom(sock *zmq.Socket, flags zmq.Flag, socket string, lim frameLimits) (message, error) {
	for range 1024 {
		// The sender's address names its budget for bogus messages (guard.go); under CURVE,
		// its key.
		msg, md, err := recvLimited(sock, flags, lim)
		if err != nil {
			return message{}, err
		}
		msg.from = peer{addr: md.peerAddr}
		if !s.sec.curve {
			return msg, nil
		}
		name, ok := s.sec.allowed(md.userID)
		if ok {
			msg.from.key = name
			return msg, nil
		}
		s.sec.refused.WithLabelValues(socket).Inc()
		s.metrics.discards.WithLabelValues(socket, "key_not_allowed").Inc()
		if n, emit := s.sec.deniedLog.Record(); emit {
			s.logger.Warn("messages from keys not allowed (revoked) dropped", "count", n, "socket", socket,
				"public_key", md.userID, "peer", msg.from.addr)
		}
	}
	return message{}, zmq.Errno(syscall.EAGAIN)
}

// recvLimited receives one multipart message within lim, and the User-Id and Peer-Address
// properties of its connection. They are read from the first frame that carries them: a
// ROUTER's routing id frame has none when the message was taken in by a poll. Once the first
// frame is in, the rest of the message is there too (libzmq delivers whole messages), so the
// later receives never wait.
func recvLimited(sock *zmq.Socket, flags zmq.Flag, lim frameLimits) (message, connMeta, error) {
	var msg message
	var md connMeta
	var cf cframe // one C frame for the whole message: one allocation, not one a frame
	var kept int64
	dropping := false
	for {
		header := len(msg.frames) < lim.headers
		keep := -1 // what this frame may hold to be copied
		switch {
		case header:
			keep = wire.MaxHeaderBytes
		case !dropping:
			keep = int(min(lim.body-kept-frameCost, math.MaxInt32))
		}
		f, err := recvFrame(sock, &cf, flags, keep, !md.found)
		if err != nil {
			return msg, md, err
		}
		if f.md.found {
			md = f.md
		}
		switch {
		case header:
			if f.data == nil && msg.err == nil {
				msg.err = &wire.FrameError{Reason: wire.ReasonHeaderTooLarge,
					Detail: fmt.Sprintf("frame %d of %d bytes", len(msg.frames), f.size)}
			}
			msg.frames = append(msg.frames, f.data)
		case f.data != nil:
			kept += int64(f.size) + frameCost
			msg.frames = append(msg.frames, f.data)
		default:
			dropping = true
			msg.droppedBytes += int64(f.size)
			msg.droppedFrames++
		}
		if !f.more {
			return msg, md, nil
		}
	}
}
