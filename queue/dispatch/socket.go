package dispatch

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// pollInterval bounds how long a socket loop waits before it checks for a stop.
const pollInterval = 50 * time.Millisecond

func isAgain(err error) bool { return zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) }

// isClosed reports whether err means the socket or its context is gone.
func isClosed(err error) bool {
	e := zmq.AsErrno(err)
	return e == zmq.ETERM || e == zmq.Errno(syscall.ENOTSOCK)
}

// setKeepalive turns TCP keepalive on (idle seconds, 30 s interval, 4 probes), or off for
// idle ≤ 0. Set before bind so accepted connections inherit it.
func setKeepalive(s *zmq.Socket, idle int) error {
	if idle <= 0 {
		return s.SetTcpKeepalive(0)
	}
	for _, set := range []func() error{
		func() error { return s.SetTcpKeepalive(1) },
		func() error { return s.SetTcpKeepaliveIdle(idle) },
		func() error { return s.SetTcpKeepaliveIntvl(30) },
		func() error { return s.SetTcpKeepaliveCnt(4) },
	} {
		if err := set(); err != nil {
			return fmt.Errorf("tcp keepalive: %w", err)
		}
	}
	return nil
}

// listenBacklog is the listen backlog of the worker-facing sockets (ZMQ_BACKLOG, 100 by
// default): a fleet of thousands that connects at once (a replica's restart, a fleet's) would
// otherwise overflow it, and each connection whose SYN is dropped waits out TCP's retransmit,
// 1, 3, then 7 s, before its first request goes out. The kernel caps it at
// net.core.somaxconn (4096 by default). See docs/operations.md#fleet-size.
const listenBacklog = 4096

// setHeartbeat turns ZMTP heartbeats on: a PING every ivl on a quiet connection, which is
// closed when nothing comes back within timeout; the peer is told (TTL) to give up on us after
// timeout too. Set before bind so accepted connections inherit it.
func setHeartbeat(s *zmq.Socket, ivl, timeout time.Duration) error {
	for _, set := range []func() error{
		func() error { return s.SetHeartbeatIvl(ivl) },
		func() error { return s.SetHeartbeatTimeout(timeout) },
		func() error { return s.SetHeartbeatTtl(timeout) },
	} {
		if err := set(); err != nil {
			return fmt.Errorf("zmtp heartbeat: %w", err)
		}
	}
	return nil
}

// bindRetry binds s to addr, retrying every 500 ms for up to retry (an address still in
// TIME_WAIT after a restart comes free within 60 s on Linux).
func bindRetry(ctx context.Context, s *zmq.Socket, addr string, retry time.Duration) error {
	deadline := time.Now().Add(retry)
	for {
		err := s.Bind(addr)
		if err == nil {
			return nil
		}
		if zmq.AsErrno(err) != zmq.Errno(syscall.EADDRINUSE) || time.Now().After(deadline) {
			return fmt.Errorf("bind %s: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bind %s: %w", addr, errors.Join(err, ctx.Err()))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// lastEndpoint reports the endpoint a socket bound last (the real port of a "tcp://…:*" bind).
func lastEndpoint(s *zmq.Socket) string {
	ep, err := s.GetLastEndpoint()
	if err != nil {
		return ""
	}
	return ep
}
