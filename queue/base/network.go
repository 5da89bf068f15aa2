package base

import (
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"
)

// Settings of the database sockets (docs/operations.md#networks): a connection whose peer is
// gone without a word (a dead host, a firewall or NAT that dropped it) is found and closed by
// the kernel within about DeadPeerTimeout, whatever call waits on it, and the pool then opens
// a new one. Keepalive probes find it on an idle connection; TCP_USER_TIMEOUT on one with data
// unacknowledged, where the kernel would otherwise retransmit for ~15 minutes.
const (
	keepaliveIdle     = 5 * time.Second
	keepaliveInterval = 2 * time.Second
	keepaliveCount    = 3
	// DeadPeerTimeout is TCP_USER_TIMEOUT: how long sent data may stay unacknowledged.
	DeadPeerTimeout = 10 * time.Second
	// connectTimeoutDefault bounds a new connection when the connection string sets none.
	connectTimeoutDefault = 10 * time.Second
	// healthCheckPeriod is how often the pool drops its connections past their lifetime or
	// idle time and refills its minimum.
	healthCheckPeriod = 5 * time.Second
)

// TuneNetwork sets keepalive and TCP_USER_TIMEOUT on the pool's TCP connections (unix sockets
// are left as they are), a connect timeout where the connection string sets none, and the
// pool's health check period.
func TuneNetwork(cfg *pgxpool.Config) {
	d := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepaliveIdle, Interval: keepaliveInterval, Count: keepaliveCount},
		Control:         setUserTimeout,
	}
	cfg.ConnConfig.DialFunc = d.DialContext
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeoutDefault
	}
	cfg.HealthCheckPeriod = healthCheckPeriod
}

// setUserTimeout sets TCP_USER_TIMEOUT on a TCP socket before it connects.
func setUserTimeout(network, _ string, c syscall.RawConn) error {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil
	}
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(DeadPeerTimeout/time.Millisecond))
	})
	if err != nil {
		return err
	}
	return serr
}
