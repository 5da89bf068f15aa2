package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/puzpuzpuz/xsync/v4"

	"github.com/cortexq/cortexq/queue/allowlist"
	"github.com/cortexq/cortexq/queue/internal/startstop"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/wire"
)

// Security configures who may use a replica's worker-facing sockets, and how much a hostile
// peer can make the replica do.
type Security struct {
	// CurveSecretKey, when set, is the replica's CURVE secret key (Z85): both worker-facing
	// sockets then run CURVE (authenticated, encrypted), and only workers whose public key is on
	// the allow-list (table worker_keys) get in. Empty: plain ZMTP (NULL), for loopback and
	// trusted networks.
	CurveSecretKey string
	// KeysRefresh is how often the allow-list is read again (KeysRefreshDefault if zero): an
	// allowed or revoked key takes effect within it, on every replica.
	KeysRefresh time.Duration
	// HandshakeTimeout bounds a new connection's ZMTP handshake, so a peer that stalls in it
	// (a slow loris) holds nothing for long (HandshakeTimeoutDefault if zero).
	HandshakeTimeout time.Duration
	// PeerBogusRate and PeerBogusBurst are, per peer (its key under CURVE, else its IP
	// address), the budget of results naming a task that does not exist or that it may not
	// answer, and of messages naming a service that does not exist: past it, its results for
	// tasks this replica does not mirror are looked up in the slow lane (guard.go), and a
	// service name that is not cached is refused without a lookup, until the budget refills.
	// Defaults PeerBogusRateDefault and PeerBogusBurstDefault.
	PeerBogusRate  float64
	PeerBogusBurst int
	// MissingTTL is how long a task id found missing is answered from memory (MissingTTLDefault
	// if zero): a repeated bogus id costs no lookup.
	MissingTTL time.Duration
}

// Defaults of Security.
const (
	KeysRefreshDefault      = 2 * time.Second
	HandshakeTimeoutDefault = 10 * time.Second
	PeerBogusRateDefault    = 20.0
	PeerBogusBurstDefault   = 100
	MissingTTLDefault       = 30 * time.Second
)

// zapDomain is the ZAP domain of the worker-facing sockets.
const zapDomain = "cortexq"

// zapEndpoint is where libzmq asks a socket's context for ZAP decisions (RFC 27).
const zapEndpoint = "inproc://zeromq.zap.01"

// security is a Server's allow-list, its ZAP handler's state and its budgets for bogus results.
type security struct {
	cfg       Security
	curve     bool
	publicKey string
	keys      atomic.Pointer[map[string]string] // allowed public key (Z85) → name

	peersMu sync.Mutex
	peers   map[string]*bucket
	missing *xsync.Map[int64, time.Time]

	// coldLookups counts the result task ids looked up at once (not mirrored, sender within its
	// budget), slowLookups the slow lane's queries, and serviceLookups the lookups of service
	// names that are not cached.
	coldLookups    atomic.Int64
	slowLookups    atomic.Int64
	serviceLookups atomic.Int64
	lookups        prometheus.Counter
	limited        prometheus.Counter
	refused        *prometheus.CounterVec

	zapLog    *wire.RateLimiter
	deniedLog *wire.RateLimiter
	bogusLog  *wire.RateLimiter
}

func newSecurity(cfg Security, reg prometheus.Registerer) (*security, error) {
	if cfg.KeysRefresh <= 0 {
		cfg.KeysRefresh = KeysRefreshDefault
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = HandshakeTimeoutDefault
	}
	if cfg.PeerBogusRate <= 0 {
		cfg.PeerBogusRate = PeerBogusRateDefault
	}
	if cfg.PeerBogusBurst <= 0 {
		cfg.PeerBogusBurst = PeerBogusBurstDefault
	}
	if cfg.MissingTTL <= 0 {
		cfg.MissingTTL = MissingTTLDefault
	}
	sec := &security{
		cfg:       cfg,
		peers:     map[string]*bucket{},
		missing:   xsync.NewMap[int64, time.Time](),
		zapLog:    wire.NewRateLimiter(5 * time.Second),
		deniedLog: wire.NewRateLimiter(5 * time.Second),
		bogusLog:  wire.NewRateLimiter(5 * time.Second),
	}
	empty := map[string]string{}
	sec.keys.Store(&empty)
	if cfg.CurveSecretKey != "" {
		if !zmq.HasCurve() {
			return nil, errors.New("curve: this libzmq was built without CURVE")
		}
		pub, err := zmq.AuthCurvePublic(cfg.CurveSecretKey)
		if err != nil || len(cfg.CurveSecretKey) != 40 {
			return nil, fmt.Errorf("curve: the secret key is not a Z85-encoded CURVE key: %v", err)
		}
		sec.curve, sec.publicKey = true, pub
	}
	sec.lookups = prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_cold_task_lookups_total",
		Help: "Database queries looking up the tasks of results this replica does not mirror (each for a batch of ids)."})
	sec.limited = prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_bogus_results_limited_total",
		Help: "Messages of peers past their budget for bogus ids: results looked up in the slow lane, service names refused without a lookup."})
	sec.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cortexq_curve_refusals_total",
		Help: "CURVE handshakes refused by the ZAP handler, and messages dropped from keys no longer allowed, by socket."}, []string{"socket"})
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	for _, c := range []prometheus.Collector{sec.lookups, sec.limited, sec.refused} {
		_ = reg.Register(c)
	}
	return sec, nil
}

// PublicKey reports the replica's CURVE public key (Z85), or "" in plain mode.
func (s *Server) PublicKey() string { return s.sec.publicKey }

// peer is who sent a message, as far as the replica can tell.
type peer struct {
	// key is the name of the allow-listed key the sender authenticated with ("" in plain mode).
	key string
	// addr is the sender's IP address, where libzmq reports it.
	addr string
}

// budgetName is the name the peer's bogus-result budget goes by.
func (p peer) budgetName() string {
	if p.key != "" {
		return "key:" + p.key
	}
	return "addr:" + p.addr
}

// worker is the name a worker calling itself name is recorded under: in CURVE mode it is
// prefixed with the authenticated key's name, so only the key vouches for it.
func (p peer) worker(name string) string {
	if p.key == "" {
		return name
	}
	return lease.KeyedWorker(p.key, name)
}

// secure sets up sockets for hostile networks before they are bound: a handshake timeout
// and, with CURVE, the server role, the ZAP handler and the allow-list poller. It warns when
// a plain socket is bound beyond loopback. The returned func stops the poller; the ZAP
// handler lives until the context is terminated, after the sockets are closed, because libzmq
// lets any CURVE client in while no handler is bound.
func (s *auth) secure(ctx context.Context, zctx *zmq.Context, socks ...*zmq.Socket) (stop func(), err error) {
	for _, sock := range socks {
		if err := sock.SetHandshakeIvl(s.sec.cfg.HandshakeTimeout); err != nil {
			return nil, fmt.Errorf("handshake timeout: %w", err)
		}
	}
	if !s.sec.curve {
		for _, addr := range []string{s.cfg.VentilatorAddr, s.cfg.SinkAddr} {
			if !loopback(addr) {
				s.logger.Warn("worker socket bound beyond loopback without CURVE: any host that reaches it can take tasks and push results; use --curve-secret-key-file on untrusted networks",
					"endpoint", addr)
			}
		}
		return func() {}, nil
	}
	zap, err := zctx.NewSocket(zmq.REP)
	if err != nil {
		return nil, fmt.Errorf("zap socket: %w", err)
	}
	err = zap.SetLinger(0)
	if err == nil {
		err = zap.SetRcvtimeo(pollInterval) // how soon serveZAP notices the stop
	}
	if err == nil {
		err = zap.Bind(zapEndpoint)
	}
	if err != nil {
		zap.Close()
		return nil, fmt.Errorf("zap handler: %w", err)
	}
	pctx, stopPoll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stopAll := func() { stopPoll(); wg.Wait() }
	wg.Go(func() { s.serveZAP(pctx, zap) })
	for _, sock := range socks {
		if err := sock.ServerAuthCurve(zapDomain, s.sec.cfg.CurveSecretKey); err != nil {
			stopAll()
			return nil, fmt.Errorf("curve server: %w", err)
		}
	}
	// Read the allow-list before the sockets are bound, so allowed workers get in at once.
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	s.reloadKeys(lctx)
	cancel()
	wg.Go(func() {
		tick := time.NewTicker(s.sec.cfg.KeysRefresh)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
				s.reloadKeys(pctx)
			}
		}
	})
	s.logger.Info("CURVE on: only allow-listed worker keys get in", "public_key", s.sec.publicKey,
		"allowed_keys", len(*s.sec.keys.Load()), "keys_refresh", s.sec.cfg.KeysRefresh)
	return stopAll, nil
}

// auth is the service of CURVE on the worker sockets (secure): its ZAP handler and the
// allow-list's poller.
type auth struct {
	*core
	keys *allowlist.List
}

// service secures the ventilator's and the sink's sockets before they are bound; its stop
// stops the poller and the ZAP handler.
func (s *auth) service(z *zmqContext, v *ventilator, k *sink) startstop.Service {
	return startstop.Funcs(func(ctx context.Context) (func(), error) {
		return s.secure(ctx, z.Context, v.router, k.pull)
	})
}

// ReloadKeys reads the allow-list now rather than at the next poll.
func (s *Server) ReloadKeys(ctx context.Context) error { return s.auth.reload(ctx) }

// reload reads the allow-list.
func (s *auth) reload(ctx context.Context) error {
	keys, err := s.keys.Allowed(ctx)
	if err != nil {
		return err
	}
	s.sec.keys.Store(&keys)
	return nil
}

func (s *auth) reloadKeys(ctx context.Context) {
	before := len(*s.sec.keys.Load())
	if err := s.reload(ctx); err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("allow-list not read; the last one read stands", "error", err)
		}
		return
	}
	if n := len(*s.sec.keys.Load()); n != before {
		s.logger.Info("allow-list changed", "allowed_keys", n)
	}
}

// allowed reports the name of an allowed public key.
func (sec *security) allowed(publicKey string) (string, bool) {
	name, ok := (*sec.keys.Load())[publicKey]
	return name, ok
}

// serveZAP answers libzmq's ZAP requests (RFC 27) until ctx ends (checked at each receive
// timeout) or the ZeroMQ context is terminated: a CURVE client is let in when its public key is
// on the allow-list, with the key as its User-Id. It owns the socket and closes it.
func (s *auth) serveZAP(ctx context.Context, zap *zmq.Socket) {
	defer zap.Close()
	for ctx.Err() == nil {
		req, err := zap.RecvMessageBytes(0)
		if err != nil {
			if zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) {
				continue
			}
			return // ETERM: the sockets are closed and the context ends
		}
		if _, err := zap.SendMessage(s.sec.decide(req)...); err != nil && isClosed(err) {
			return
		}
	}
}

// decide answers one ZAP request: [version, request id, domain, address, identity, mechanism,
// credentials…] → [version, request id, status code, status text, user id, metadata].
func (sec *security) decide(req [][]byte) []any {
	if len(req) < 2 {
		return []any{"1.0", "", "500", "malformed ZAP request", "", ""}
	}
	reply := func(code, text, user string) []any { return []any{"1.0", req[1], code, text, user, ""} }
	if len(req) < 7 || string(req[0]) != "1.0" {
		return reply("500", "malformed ZAP request", "")
	}
	if string(req[5]) != "CURVE" || len(req[6]) != 32 {
		sec.refused.WithLabelValues("zap").Inc()
		return reply("400", "CURVE required", "")
	}
	key := zmq.Z85encode(string(req[6]))
	if _, ok := sec.allowed(key); !ok {
		sec.refused.WithLabelValues("zap").Inc()
		return reply("400", "key not allowed", "")
	}
	return reply("200", "OK", key)
}

// loopback reports whether a ZeroMQ endpoint stays on this host: inproc, ipc, or tcp on a
// loopback address.
func loopback(endpoint string) bool {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	switch {
	case !ok:
		return false
	case scheme == "inproc" || scheme == "ipc":
		return true
	case scheme != "tcp":
		return false
	}
	if i := strings.LastIndexByte(rest, ';'); i >= 0 { // tcp://source;target
		rest = rest[i+1:]
	}
	host := rest
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		host = rest[:i]
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
