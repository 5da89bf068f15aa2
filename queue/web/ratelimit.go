package web

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Sign-in attempts are rate limited so no token can be guessed online: each client address (an
// IPv6 client by its /64), and each owner an attempt names (the sign-in form's owner, a revoked
// token's owner, a passkey's), may fail signInBurst times, then once per signInEvery; past
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

// ownerKey is an owner's bucket among the addresses' (an address never starts with it).
func ownerKey(owner string) string { return "owner:" + owner }

// bucketOf returns key's bucket, refilled to now (made full if new).
func (l *signInLimiter) bucketOf(key string, now time.Time) *bucket {
	c := l.clients[key]
	if c == nil {
		if len(l.clients) >= signInMaxClients {
			l.prune(now)
		}
		c = &bucket{}
		l.clients[key] = c
	}
	c.refill(now, signInBurst, signInEvery)
	return c
}

// take reserves one attempt for addr, and for owner if one is named. own is how long they must
// wait (zero: they may go on, and their attempt is reserved); all is how long until all clients
// together may fail again (zero: an attempt of theirs is reserved too). Give back what was
// reserved with refund when it succeeds.
func (l *signInLimiter) take(addr, owner string) (own, all time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.all.refill(now, signInAllBurst, signInAllEvery)
	keys := []string{addr}
	if owner != "" {
		keys = append(keys, ownerKey(owner))
	}
	for _, k := range keys {
		own = max(own, l.bucketOf(k, now).wait(signInEvery))
	}
	if own > 0 {
		return own, 0
	}
	for _, k := range keys {
		l.clients[k].tokens--
	}
	if w := l.all.wait(signInAllEvery); w > 0 {
		return 0, w
	}
	l.all.tokens--
	return 0, 0
}

// charge counts a failed attempt against owner (found only after take: a revoked token's).
func (l *signInLimiter) charge(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bucketOf(ownerKey(owner), l.now()).tokens--
}

// locked is how long owner is locked out (zero: it is not).
func (l *signInLimiter) locked(owner string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucketOf(ownerKey(owner), l.now()).wait(signInEvery)
}

// refund gives back the attempt take reserved: it succeeded. all says whether take reserved one
// of all clients' too.
func (l *signInLimiter) refund(addr, owner string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range []string{addr, ownerKey(owner)} {
		if c := l.clients[k]; c != nil && (k == addr || owner != "") {
			c.tokens = min(float64(signInBurst), c.tokens+1)
		}
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
