package web

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Sign-in attempts are rate limited so the admin token cannot be guessed online: each client
// address (an IPv6 client by its /64) may fail signInBurst times, then once per signInEvery; past
// that its attempts are answered 429 with Retry-After, their token not even compared. All
// clients together may fail signInAllBurst times, then once per signInAllEvery; past that a wrong
// token is answered 429 too, but the right one still signs in: failures from elsewhere never
// lock out the admin at an address of their own.
const (
	signInBurst    = 10
	signInEvery    = 30 * time.Second
	signInAllBurst = 50
	signInAllEvery = 2 * time.Second
	// signInMaxClients bounds the addresses remembered; past it, those back to a full bucket go.
	signInMaxClients = 4096
)

// bucket is a token bucket: burst tokens, one more every every, taken by failed attempts.
type bucket struct {
	tokens float64
	at     time.Time
}

// refill brings b up to now and returns it.
func (b *bucket) refill(now time.Time, burst int, every time.Duration) {
	if b.at.IsZero() {
		b.tokens, b.at = float64(burst), now
		return
	}
	b.tokens = min(float64(burst), b.tokens+float64(now.Sub(b.at))/float64(every))
	b.at = now
}

// wait is how long until b holds a whole token.
func (b *bucket) wait(every time.Duration) time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(every))
}

// signInLimiter counts failed sign-ins per client address and overall.
type signInLimiter struct {
	mu      sync.Mutex
	all     bucket
	clients map[string]*bucket
	now     func() time.Time
}

func newSignInLimiter() *signInLimiter {
	return &signInLimiter{clients: map[string]*bucket{}, now: time.Now}
}

// clientAddr is the request's client address without its port: the peer, not a header a client
// could set (behind a reverse proxy every client shares the proxy's bucket, and the overall one
// still holds).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	// An IPv6 client usually holds a whole /64: count it as one.
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return host
}

// take reserves one attempt for addr. own is how long addr must wait (zero: it may go on, and
// its attempt is reserved); all is how long until all clients together may fail again (zero: an
// attempt of theirs is reserved too). Give back what was reserved with refund when it succeeds.
func (l *signInLimiter) take(addr string) (own, all time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.all.refill(now, signInAllBurst, signInAllEvery)
	c := l.clients[addr]
	if c == nil {
		if len(l.clients) >= signInMaxClients {
			l.prune(now)
		}
		c = &bucket{}
		l.clients[addr] = c
	}
	c.refill(now, signInBurst, signInEvery)
	if w := c.wait(signInEvery); w > 0 {
		return w, 0
	}
	c.tokens--
	if w := l.all.wait(signInAllEvery); w > 0 {
		return 0, w
	}
	l.all.tokens--
	return 0, 0
}

// refund gives back the attempt take reserved: it succeeded. all says whether take reserved one
// of all clients' too.
func (l *signInLimiter) refund(addr string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.clients[addr]; c != nil {
		c.tokens = min(float64(signInBurst), c.tokens+1)
	}
	if all {
		l.all.tokens = min(float64(signInAllBurst), l.all.tokens+1)
	}
}

// prune forgets the addresses whose bucket is full again; if still too many, a random half.
func (l *signInLimiter) prune(now time.Time) {
	for a, b := range l.clients {
		b.refill(now, signInBurst, signInEvery)
		if b.tokens >= signInBurst {
			delete(l.clients, a)
		}
	}
	if len(l.clients) < signInMaxClients {
		return
	}
	for a := range l.clients { // map order is random: a random half
		if len(l.clients) < signInMaxClients/2 {
			break
		}
		delete(l.clients, a)
	}
}

// retryAfter writes w as a Retry-After header's whole seconds (at least 1).
func retryAfter(w time.Duration) string {
	return strconv.Itoa(int(max(1, (w+time.Second-1)/time.Second)))
}
