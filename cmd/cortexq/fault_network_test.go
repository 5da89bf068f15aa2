package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/queuetest"
)

// Network faults (docs/operations.md#networks): toxiproxy, in this process, sits between the
// replicas and PostgreSQL and between the workers and one replica, and each nemesis of
// faultNemeses is applied to those links in turn while the replicas and workers run as
// subprocesses (fault_helpers_test.go).

// faultLink is a toxiproxy proxy on loopback in front of upstream (host:port).
type faultLink struct {
	t     *testing.T
	name  string
	proxy *toxiproxy.Proxy
}

// newFaultLink starts a proxy named name on a free loopback port in front of upstream.
func newFaultLink(t *testing.T, srv *toxiproxy.ApiServer, name, upstream string) *faultLink {
	t.Helper()
	p := toxiproxy.NewProxy(srv, name, fmt.Sprintf("127.0.0.1:%d", loopbackPort(t)), upstream)
	require.NoError(t, srv.Collection.Add(p, true))
	t.Cleanup(p.Stop)
	return &faultLink{t: t, name: name, proxy: p}
}

// newFaultProxies returns toxiproxy's server, in process, its logs discarded.
func newFaultProxies() *toxiproxy.ApiServer {
	zerolog.SetGlobalLevel(zerolog.ErrorLevel) // its toxics log every byte they hold at trace level
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
}

// addr is the proxy's host:port; endpoint its ZeroMQ endpoint.
func (l *faultLink) addr() string     { return l.proxy.Listen }
func (l *faultLink) endpoint() string { return "tcp://" + l.proxy.Listen }

// toxic adds a toxic of type typ on stream (upstream: client to server; downstream: back).
func (l *faultLink) toxic(typ, stream string, attrs map[string]int) {
	l.t.Helper()
	b, err := json.Marshal(map[string]any{"name": typ + "_" + stream, "type": typ, "stream": stream,
		"toxicity": 1.0, "attributes": attrs})
	require.NoError(l.t, err)
	_, err = l.proxy.Toxics.AddToxicJson(strings.NewReader(string(b)))
	require.NoError(l.t, err)
}

// cut resets the link's connections and refuses new ones; heal undoes every nemesis.
func (l *faultLink) cut() {
	l.t.Helper()
	l.toxic("reset_peer", "upstream", map[string]int{"timeout": 0})
	time.Sleep(200 * time.Millisecond) // the connections that send anything are reset
	l.proxy.Stop()
}

// silence drops the link's bytes both ways and leaves its connections open.
func (l *faultLink) silence() {
	l.t.Helper()
	for _, s := range []string{"upstream", "downstream"} {
		l.toxic("timeout", s, map[string]int{"timeout": 0})
	}
}

func (l *faultLink) heal() {
	l.t.Helper()
	l.proxy.Toxics.ResetToxics(context.Background())
	if !l.proxy.Enabled {
		require.NoError(l.t, l.proxy.Start())
	}
}

// faultNemesis is one network fault, applied to a link.
type faultNemesis struct {
	name  string
	apply func(l *faultLink)
	// silent: the link drops bytes and keeps connections open, so a replica must notice it by
	// its deadlines and probe; cut: connections reset and new ones refused.
	silent, cut bool
}

// faultNemeses are the faults each link gets in turn.
var faultNemeses = []faultNemesis{
	{name: "latency", apply: func(l *faultLink) {
		for _, s := range []string{"upstream", "downstream"} {
			l.toxic("latency", s, map[string]int{"latency": 40, "jitter": 20})
		}
	}},
	{name: "bandwidth", apply: func(l *faultLink) {
		for _, s := range []string{"upstream", "downstream"} {
			l.toxic("bandwidth", s, map[string]int{"rate": 64}) // KB/s
		}
	}},
	{name: "silent", silent: true, apply: func(l *faultLink) { l.silence() }},
	{name: "cut", cut: true, apply: func(l *faultLink) { l.cut() }},
	{name: "one_direction", silent: true, apply: func(l *faultLink) {
		l.toxic("timeout", "upstream", map[string]int{"timeout": 0}) // requests lost, replies flow
	}},
	{name: "slow_close", apply: func(l *faultLink) {
		for _, s := range []string{"upstream", "downstream"} {
			l.toxic("slow_close", s, map[string]int{"delay": 3000})
		}
	}},
}

// newFaultNetRig starts a PostgreSQL on loopback TCP, a database on it and a rig that reaches it
// directly, and toxiproxy for the links to put in front of it (upstream: its host:port).
func newFaultNetRig(t *testing.T) (rig *faultRig, dsn, upstream string, proxies *toxiproxy.ApiServer) {
	t.Helper()
	skipShortFault(t)
	cluster := queuetest.NewTCPCluster(t, loopbackPort(t))
	dsn = cluster.NewDB(t)
	return newFaultRig(t, dsn), dsn, fmt.Sprintf("127.0.0.1:%d", cluster.Port()), newFaultProxies()
}

// Sizes of TestFaultNetwork.
const (
	faultNetTasks = 4000
	// faultNetHold is how long each nemesis lasts (the silent ones longer: they must be
	// noticed, within faultNetNotice; the database's cut as long as the refusal an operator
	// should be able to ride out in a few log lines); all well under the outage budget.
	faultNetHold       = 4 * time.Second
	faultNetSilentHold = 16 * time.Second
	faultNetCutHold    = 20 * time.Second
	faultNetNotice     = 15 * time.Second
	faultNetBudget     = 60 * time.Second
	// faultNetResume bounds how long after a heal dispatch must be going again.
	faultNetResume = 10 * time.Second
)

// TestFaultNetwork runs two replicas and a worker fleet through every nemesis, first on the
// database link (both replicas reach PostgreSQL through one proxy), then on one replica's worker
// links (its ventilator and sink): no replica exits, an outage of the database is noticed
// within 15 s (log line and cortexq_db_up) and logged in a few lines, dispatch resumes within
// 10 s of each heal, and in the end every task is NoProblem with a byte-exact archive and
// exactly one accepted attempt, no row active, the invariants clean.
func TestFaultNetwork(t *testing.T) {
	rig, dsn, upstream, proxies := newFaultNetRig(t)
	db := newFaultLink(t, proxies, "db", upstream)
	rig.stage("network", "", faultNetTasks, faultKillPayload)
	rig.dsn = queuetest.TCPDSN(db.addr(), queuetest.DBName(t, dsn)) // the replicas' link
	flags := []string{"--db-outage-budget", faultNetBudget.String(), "--lease-timeout", "10s"}
	r1 := rig.addReplica("n1", flags...)
	r2 := rig.addReplica("n2", flags...)
	rig.startReplicas()
	vent := newFaultLink(t, proxies, "vent-n1", strings.TrimPrefix(r1.ventilator, "tcp://"))
	sink := newFaultLink(t, proxies, "sink-n1", strings.TrimPrefix(r1.sink, "tcp://"))
	proxied := &replicaProc{name: "n1-proxied", ventilator: vent.endpoint(), sink: sink.endpoint()}
	rig.startWorkersOn("w", 2, 3, proxied, r2)
	rig.waitFor("work under way", time.Minute, func(p faultProgress) bool { return p.terminal >= 100 }, nil)

	for _, n := range faultNemeses {
		t.Run("db/"+n.name, func(t *testing.T) { rig.nemesis(t, n, []*faultLink{db}, true) })
	}
	for _, n := range faultNemeses {
		t.Run("workers/"+n.name, func(t *testing.T) { rig.nemesis(t, n, []*faultLink{vent, sink}, false) })
	}
	p := rig.waitFor("every task terminal", 5*time.Minute, allTerminal, nil)
	for _, rp := range rig.replicas {
		require.True(t, rp.running(), "%s stayed up", rp.name)
	}
	p, a := rig.checkFinished()
	require.Equal(t, faultNetTasks, p.noProblem, "every task NoProblem")
	active := rig.mustScalar(`SELECT count(*) FROM dispatch WHERE state IN ('reserved', 'in_flight')`)
	require.Zero(t, active, "no active dispatch row")
	var held, refused, reconnects float64
	for _, rp := range rig.replicas {
		held += rig.metricOr(rp, "cortexq_results_held_total")
		refused += rig.metricOr(rp, "cortexq_results_refused_total")
		reconnects += rig.metricOr(rp, "cortexq_db_reconnects_total")
	}
	t.Logf("fault numbers: network: %d tasks, 2 replicas, 6 worker loops; %d attempts, %d leases expired; "+
		"results held through outages %.0f, refused %.0f; outages ridden out %.0f",
		p.total, a.attempts, a.expired, held, refused, reconnects)
}

// metricOr is the replica's metric, or 0 when it cannot be read.
func (r *faultRig) metricOr(rp *replicaProc, name string) float64 {
	v, err := rp.metric(name)
	if err != nil {
		return 0
	}
	return v
}

// nemesis applies n to links, holds it, heals it and checks what the replicas did. onDB: the
// links are the database's, so an outage must be noticed and logged in a few lines.
func (r *faultRig) nemesis(t *testing.T, n faultNemesis, links []*faultLink, onDB bool) {
	parent := r.t
	r.t = t
	defer func() { r.t = parent }()
	lines := make([]int, len(r.replicas))
	for i, rp := range r.replicas {
		lines[i] = strings.Count(rp.log(), "\n")
	}
	start := time.Now()
	for _, l := range links {
		n.apply(l)
	}
	// A silent link is held long enough to be noticed; the database refused for 20 s.
	hold := faultNetHold
	switch {
	case n.silent:
		hold = faultNetSilentHold
	case n.cut && onDB:
		hold = faultNetCutHold
	}
	noticed := map[string]time.Duration{}
	for time.Since(start) < hold {
		if onDB && (n.silent || n.cut) {
			for _, rp := range r.replicas {
				if _, ok := noticed[rp.name]; !ok {
					if up, err := rp.metric("cortexq_db_up"); err == nil && up == 0 {
						noticed[rp.name] = time.Since(start)
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, l := range links {
		l.heal()
	}
	healed := time.Now()
	// Every replica reaches the database again before the next nemesis.
	for _, rp := range r.replicas {
		deadline := time.Now().Add(faultNetResume)
		for up, err := rp.metric("cortexq_db_up"); err != nil || up != 1; up, err = rp.metric("cortexq_db_up") {
			require.True(t, time.Now().Before(deadline), "%s: cortexq_db_up back to 1 within %s of the heal of %s", rp.name, faultNetResume, n.name)
			time.Sleep(100 * time.Millisecond)
		}
	}
	backAfter := time.Since(healed)
	for _, rp := range r.replicas {
		require.True(t, rp.running(), "%s stayed up through %s:\n%s", rp.name, n.name, faultTail(rp.log(), 3000))
	}
	logged := make([]int, len(r.replicas))
	for i, rp := range r.replicas {
		logged[i] = strings.Count(rp.log(), "\n") - lines[i]
	}
	if onDB && (n.silent || n.cut) {
		for i, rp := range r.replicas {
			took, ok := noticed[rp.name]
			require.True(t, ok, "%s: cortexq_db_up went 0 within %s", rp.name, hold)
			require.Less(t, took, faultNetNotice, "%s noticed the outage within %s", rp.name, faultNetNotice)
			log := rp.log()
			during := strings.Split(log, "\n")[lines[i]:]
			require.Positive(t, faultCountLines(strings.Join(during, "\n"), "database unreachable"), "%s logged the outage", rp.name)
			require.Less(t, len(during), 40, "%s wrote a few lines during the outage, not one per request:\n%s", rp.name, faultTail(strings.Join(during, "\n"), 4000))
		}
	}
	// Dispatch goes on: 20 more tasks done within faultNetResume of the heal.
	atHeal := r.waitFor("progress read after the heal", faultNetResume, func(faultProgress) bool { return true }, nil)
	r.waitFor("dispatch resumed within 10 s of the heal of "+n.name, faultNetResume-time.Since(healed),
		func(p faultProgress) bool { return p.terminal >= min(atHeal.terminal+20, p.total) }, nil)
	t.Logf("fault numbers: %s on %s: held %s, noticed after %v; log lines of each replica meanwhile %v; database reached again %s and dispatch going %s after the heal",
		n.name, links[0].name, hold, noticed, logged, backAfter.Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
}

// Sizes of TestFaultLeaderLinkDies.
const (
	faultLeaderTasks = 2000
	// faultLeaderHold is how long the leader's link stays silent: longer than River's
	// leadership TTL (its elect interval, 5 s, plus 10 s) and a re-election after it.
	faultLeaderHold = 30 * time.Second
	// faultLeaderSettle is how long after the heal the old leader has to learn it lost the role.
	faultLeaderSettle = 20 * time.Second
)

// TestFaultLeaderLinkDies silences the elected leader's database link (bytes dropped,
// connections left open) while both replicas dispatch: the other replica takes the leadership
// and its reaper passes go on during the outage; once the link heals, the old leader knows it
// lost the role (exactly one replica says it leads, and goes on leading), and
// every task still ends NoProblem with exactly one accepted attempt.
func TestFaultLeaderLinkDies(t *testing.T) {
	rig, dsn, upstream, proxies := newFaultNetRig(t)
	rig.stage("leader", "", faultLeaderTasks, faultKillPayload)
	links := map[string]*faultLink{}
	for _, name := range []string{"l1", "l2"} {
		links[name] = newFaultLink(t, proxies, "db-"+name, upstream)
		rig.dsn = queuetest.TCPDSN(links[name].addr(), queuetest.DBName(t, dsn))
		rig.addReplica(name, "--db-outage-budget", "120s", "--lease-timeout", "10s", "--fold-interval", "2s")
	}
	rig.startReplicas()
	rig.startWorkers(2, 2)
	rig.waitFor("work under way", time.Minute, func(p faultProgress) bool { return p.terminal >= 100 }, nil)

	leaders := func() map[string]bool {
		got := map[string]bool{}
		for _, rp := range rig.replicas {
			if v, err := rp.metric("cortexq_leader"); err == nil && v == 1 {
				got[rp.name] = true
			}
		}
		return got
	}
	var leader, other *replicaProc
	require.Eventually(t, func() bool {
		l := leaders()
		if len(l) != 1 {
			return false
		}
		for _, rp := range rig.replicas {
			if l[rp.name] {
				leader = rp
			} else {
				other = rp
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "one replica leads")

	silenced := rig.dbNow()
	start := time.Now()
	links[leader.name].silence()
	var tookOver time.Duration
	for time.Since(start) < faultLeaderHold {
		if tookOver == 0 && leaders()[other.name] {
			tookOver = time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NotZero(t, tookOver, "%s took the leadership while %s's link was silent for %s", other.name, leader.name, faultLeaderHold)
	passes := rig.mustScalar(`SELECT count(*) FROM reaper_passes WHERE replica = $1 AND at > $2`, other.name, silenced)
	require.Positive(t, passes, "%s reaped while the leader's link was silent", other.name)
	links[leader.name].heal()
	healed := rig.dbNow()

	// The old leader learns it lost the role: from some point after the heal, only the new
	// leader says it leads, and it keeps the role. (Either replica works the reap jobs the
	// leader enqueues, so passes say nothing of who leads.)
	require.Eventually(t, func() bool {
		l := leaders()
		return len(l) == 1 && l[other.name]
	}, faultLeaderSettle, 200*time.Millisecond, "after the heal only %s leads", other.name)
	settled := rig.dbNow()
	for range 25 {
		require.Equal(t, map[string]bool{other.name: true}, leaders(), "one leader, %s, once settled", other.name)
		time.Sleep(200 * time.Millisecond)
	}

	p := rig.waitFor("every task terminal", 5*time.Minute, allTerminal, nil)
	for _, rp := range rig.replicas {
		require.True(t, rp.running(), "%s stayed up", rp.name)
	}
	p, a := rig.checkFinished()
	require.Equal(t, faultLeaderTasks, p.noProblem, "every task NoProblem")
	t.Logf("fault numbers: leader link: %s silent for %s, %s led after %v (%.0f reaper passes meanwhile); "+
		"leadership settled %v after the heal; %d attempts, %d leases expired",
		leader.name, faultLeaderHold, other.name, tookOver.Round(time.Millisecond), passes,
		settled.Sub(healed).Round(time.Millisecond), a.attempts, a.expired)
}
