package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/procstat"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// Sizes of the huge-report attack of issue 17: a 33 KB zip whose cortex.log holds 10,000 lines
// of "Warning:amp:x <~2,000 bytes>", sent as the result of leased tasks while honest echo
// workers convert 300 tasks.
const (
	attackLogLines    = 10_000
	attackHonestTasks = 300
	// attackRSSLimit is the target for the replica's peak RSS.
	attackRSSLimit = 300 << 20
	// attackRSSGuard stops a replica that blows up (the code before the fix reached 4.4 GB), so
	// that the test fails without taking the machine down.
	attackRSSGuard = 2 << 30
	// attackBudget bounds each attack run.
	attackBudget = 3 * time.Minute
)

// TestAttackHugeReports sends the result of 20 and of 200 leased tasks as a small archive that
// inflates to 10,000 warnings of 2 KB each, while honest echo workers convert 300 tasks: the
// replica's peak RSS stays within 300 MB, no claim stalls on a report, every honest
// task is recorded, and each attack task is recorded with 1,000 warnings and one
// cortex/messages_truncated giving the exact total.
func TestAttackHugeReports(t *testing.T) {
	skipShortFault(t)
	for _, n := range []int{20, 200} {
		t.Run(fmt.Sprintf("%dResults", n), func(t *testing.T) { attackHugeReports(t, n) })
	}
}

func attackHugeReports(t *testing.T, n int) {
	rig := newFaultRig(t, queuetest.ConnString(t))
	rig.stage("attack", "", n+attackHonestTasks, 512)
	// Leases outlast the attack (its whole budget, on however loaded a machine), so that no
	// attack task is requeued to the honest workers, whose results would then replace the
	// attacker's. The attacker may hold its n leases under one identity (in plain mode it could
	// as well take a fresh identity for each).
	rp := rig.addReplica("r1", "--lease-timeout", attackBudget.String(), "--max-in-flight-per-worker", strconv.Itoa(n))
	rig.startReplicas()

	// The attacker leases n tasks, then pushes the same bomb as the result of each.
	attacker := newAttackPeer(t, rp, "attacker", "", nil)
	attacked := make([]int64, 0, n)
	for id := range attacker.leaseN(n) {
		attacked = append(attacked, id)
	}
	bomb := attackBomb(t)
	t.Logf("bomb: %d bytes, its cortex.log %d lines", len(bomb), attackLogLines)

	peak := watchRSS(t, rp)
	start := time.Now()
	rig.startWorkers(1, 4)
	sent := 0
	for _, id := range attacked {
		if attacker.push(id, bomb) {
			sent++
		}
	}
	t.Logf("%d of %d attack results sent in %s", sent, n, time.Since(start).Round(time.Millisecond))

	var honestDone time.Duration
	rig.waitFor("every task recorded", attackBudget, allTerminal, func(faultProgress) {
		if !rp.running() {
			t.Fatalf("the replica stopped; its peak RSS %d MB (guard %d MB)", peak()>>20, attackRSSGuard>>20)
		}
		if honestDone == 0 && rig.mustScalar(`SELECT count(*) FROM tasks WHERE corpus_id = $1 AND status < 0 AND NOT id = ANY($2)`,
			rig.corpusID, attacked) == attackHonestTasks {
			honestDone = time.Since(start)
		}
	})
	if honestDone == 0 {
		honestDone = time.Since(start)
	}
	rss := peak()
	p99, claims := rp.quantile("cortexq_claim_seconds", 0.99)
	t.Logf("fault numbers: %d attack results: replica peak RSS %d MB, claim p99 %.3f s over %.0f claims, "+
		"%d honest tasks recorded in %s", n, rss>>20, p99, claims, attackHonestTasks, honestDone.Round(time.Millisecond))

	require.LessOrEqual(t, rss, int64(attackRSSLimit), "replica peak RSS")
	// The target is a claim p99 within 1 s, met and reported by the line above (0.5-0.9 s
	// here). A test asserts no speed goal, and the whole suite running on two cores moves it, so
	// this bound only catches claims stalled by a report: before the fix they took ~45 s, past
	// the histogram's last bucket (4.1 s).
	require.Less(t, p99, 4.0, "claim p99 in seconds")
	// Each attack task: its first 1,000 warnings, and the exact total.
	require.Equal(t, float64(n), rig.mustScalar(`
		SELECT count(*) FROM (
			SELECT m.task_id FROM task_messages m JOIN tasks t ON t.id = m.task_id AND t.run = m.run
			WHERE m.task_id = ANY($1)
			GROUP BY m.task_id
			HAVING count(*) FILTER (WHERE m.severity = 'warning' AND m.what = 'x') = 1000
			   AND count(*) FILTER (WHERE m.what = 'messages_truncated' AND m.severity = 'warning'
			                         AND m.details = '10000 warning messages in all; the first 1000 were kept') = 1
			   AND count(*) = 1001) AS ok`, attacked))
}

// TestAttackHugeReportsFromAKeyHoldingNoTask: under CURVE, an allowed key that holds no task
// sends the bomb as the result of 15 tasks another key holds, while that key's honest workers
// convert 300 tasks. The replica parses none of it: each is dropped as not_holder before its
// archive is read, its RSS stays within 300 MB, and every task is recorded from its holder.
func TestAttackHugeReportsFromAKeyHoldingNoTask(t *testing.T) {
	skipShortFault(t)
	const n = 15
	rig := newFaultRig(t, queuetest.ConnString(t))
	rig.stage("attack", "", n+attackHonestTasks, 512)
	server, alice, mallory := newKeyFile(t, rig.dir, "server"), newKeyFile(t, rig.dir, "alice"), newKeyFile(t, rig.dir, "mallory")
	for _, k := range []keyFile{alice, mallory} {
		_, err := rig.root.Allowlist.Allow(rig.ctx, k.public, k.name)
		require.NoError(t, err)
	}
	rp := rig.addReplica("r1", "--lease-timeout", "60s", "--curve-secret-key-file", server.path,
		"--max-in-flight-per-worker", strconv.Itoa(n))
	rig.startReplicas()

	// A hand-driven peer of alice's key leases n tasks.
	holder := newAttackPeer(t, rp, "alice-hand", server.public, &alice)
	held := holder.leaseN(n)
	peak := watchRSS(t, rp)
	w := rig.child("worker-0", "--log-level", "warn", "worker", "echo", "--service", faultService,
		"--identity", "honest", "--concurrency", "4", "--ventilator", rp.ventilator, "--sink", rp.sink,
		"--throttle", "100ms", "--io-timeout", "3s", "--server-key", server.public, "--key-file", alice.path)
	w.start()
	rig.workers = append(rig.workers, w)

	thief := newAttackPeer(t, rp, "mallory", server.public, &mallory)
	bomb := attackBomb(t)
	for id := range held {
		thief.push(id, bomb)
	}
	notHolder := func() float64 { return rp.labelled("cortexq_discards_total", `reason="not_holder"`) }
	deadline := time.Now().Add(attackBudget)
	for notHolder() < n && rp.running() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	for id, payload := range held {
		holder.push(id, payload)
	}
	rig.waitFor("every task recorded", attackBudget, allTerminal, func(faultProgress) {
		if !rp.running() {
			t.Fatalf("the replica stopped; its peak RSS %d MB (guard %d MB)", peak()>>20, attackRSSGuard>>20)
		}
	})
	rss := peak()
	t.Logf("fault numbers: %d results from a key holding no task: replica peak RSS %d MB, %.0f dropped as not_holder before parsing, "+
		"%.0f decided not_holder by a claim", n, rss>>20, notHolder(), rp.labelled("cortexq_claims_total", `outcome="not_holder"`))
	require.LessOrEqual(t, rss, int64(attackRSSLimit), "replica peak RSS")
	require.Equal(t, float64(n), notHolder(), "every bomb dropped before it was parsed")
	require.Zero(t, rp.labelled("cortexq_claims_total", `outcome="not_holder"`), "no bomb reached a claim")
	require.Zero(t, rig.mustScalar(`SELECT count(*) FROM attempts WHERE worker NOT LIKE 'key:alice/%'`))
}

// keyFile is a CURVE key pair written as `cortexq keys gen` writes it.
type keyFile struct{ name, path, public, secret string }

func newKeyFile(t *testing.T, dir, name string) keyFile {
	t.Helper()
	public, secret, err := zmq.NewCurveKeypair()
	require.NoError(t, err)
	k := keyFile{name: name, path: filepath.Join(dir, name+".key"), public: public, secret: secret}
	require.NoError(t, os.WriteFile(k.path, fmt.Appendf(nil, "curve\n    public-key = %q\n    secret-key = %q\n", public, secret), 0o600))
	return k
}

// attackPeer is a hand-driven worker of the attack tests: a DEALER and a PUSH socket, with
// CURVE when given a key.
type attackPeer struct {
	t              *testing.T
	identity       string
	dealer, pusher *zmq.Socket
}

func newAttackPeer(t *testing.T, rp *replicaProc, identity, serverKey string, k *keyFile) *attackPeer {
	t.Helper()
	p := &attackPeer{t: t, identity: identity}
	var err error
	p.dealer, err = zmq.NewSocket(zmq.DEALER)
	require.NoError(t, err)
	t.Cleanup(func() { p.dealer.Close() })
	p.pusher, err = zmq.NewSocket(zmq.PUSH)
	require.NoError(t, err)
	t.Cleanup(func() { p.pusher.Close() })
	for _, s := range []*zmq.Socket{p.dealer, p.pusher} {
		require.NoError(t, s.SetLinger(0))
		if k != nil {
			require.NoError(t, s.ClientAuthCurve(serverKey, k.public, k.secret))
		}
	}
	require.NoError(t, p.dealer.SetIdentity(identity))
	require.NoError(t, p.dealer.SetRcvtimeo(10*time.Second))
	require.NoError(t, p.dealer.Connect(rp.ventilator))
	require.NoError(t, p.pusher.SetSndtimeo(time.Second))
	require.NoError(t, p.pusher.Connect(rp.sink))
	return p
}

// lease requests a task: its id (0 for no work) and payload.
func (p *attackPeer) lease() (int64, []byte) {
	p.t.Helper()
	_, err := p.dealer.Send(faultService, 0)
	require.NoError(p.t, err)
	msg, err := p.dealer.RecvMessageBytes(0)
	require.NoError(p.t, err)
	id, err := strconv.ParseInt(string(msg[0]), 10, 64)
	require.NoError(p.t, err)
	return id, bytes.Join(msg[1:], nil)
}

// leaseN leases n tasks, within attackBudget: their ids and payloads.
func (p *attackPeer) leaseN(n int) map[int64][]byte {
	p.t.Helper()
	held := make(map[int64][]byte, n)
	deadline := time.Now().Add(attackBudget)
	for len(held) < n {
		require.True(p.t, time.Now().Before(deadline), "%s leased %d of %d tasks in %s", p.identity, len(held), n, attackBudget)
		if id, payload := p.lease(); id > 0 {
			held[id] = payload
		}
	}
	return held
}

// push sends data as the result of task id (a send that times out is not retried).
func (p *attackPeer) push(id int64, data []byte) bool {
	_, err := p.pusher.SendMessage(p.identity, faultService, strconv.FormatInt(id, 10), data)
	return err == nil
}

// labelled reads the sample of a metric whose labels contain label, 0 when there is none.
func (rp *replicaProc) labelled(name, label string) float64 {
	rp.t.Helper()
	code, body, err := faultGet("http://" + rp.http + "/metrics")
	require.NoError(rp.t, err)
	require.Equal(rp.t, 200, code)
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, label) {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), 64)
			require.NoError(rp.t, err, line)
			return v
		}
	}
	return 0
}

// attackBomb is the archive: a cortex.log of attackLogLines warnings with ~2,000 bytes of
// details each, deflated to a few dozen KB.
func attackBomb(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "cortex.log", Method: zip.Deflate})
	require.NoError(t, err)
	line := "Warning:amp:x " + strings.Repeat("x", 1990) + "\n"
	for range attackLogLines {
		_, err := w.Write([]byte(line))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// watchRSS polls the replica's RSS until the test ends, killing it past attackRSSGuard; the
// returned func reports its peak RSS so far (the kernel's high-water mark when it still runs).
func watchRSS(t *testing.T, rp *replicaProc) func() int64 {
	pid := rp.pid()
	var peak atomic.Int64
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if rss, err := procstat.StatusBytes(pid, "VmRSS"); err == nil {
				peak.Store(max(peak.Load(), rss))
				if rss > attackRSSGuard {
					rp.kill9()
					return
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	return func() int64 {
		if hwm, err := procstat.StatusBytes(pid, "VmHWM"); err == nil {
			peak.Store(max(peak.Load(), hwm))
		}
		return peak.Load()
	}
}

// pid is the process id of the running replica.
func (rp *replicaProc) pid() int {
	cmd, _ := rp.current()
	return cmd.Process.Pid
}

// quantile estimates the q-quantile of a histogram on the replica's /metrics as Prometheus's
// histogram_quantile does (linear within the bucket), and reports its count of observations.
func (rp *replicaProc) quantile(name string, q float64) (float64, float64) {
	rp.t.Helper()
	code, body, err := faultGet("http://" + rp.http + "/metrics")
	require.NoError(rp.t, err)
	require.Equal(rp.t, 200, code)
	type bucket struct{ le, count float64 }
	var buckets []bucket
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(line, name+`_bucket{le="`)
		if !ok {
			continue
		}
		le, count, ok := strings.Cut(rest, `"} `)
		require.True(rp.t, ok, line)
		b := bucket{le: math.Inf(1)}
		if le != "+Inf" {
			b.le, err = strconv.ParseFloat(le, 64)
			require.NoError(rp.t, err)
		}
		b.count, err = strconv.ParseFloat(strings.TrimSpace(count), 64)
		require.NoError(rp.t, err)
		buckets = append(buckets, b)
	}
	require.NotEmpty(rp.t, buckets, "no histogram %s", name)
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].le < buckets[j].le })
	total := buckets[len(buckets)-1].count
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower, total // beyond the last bucket: its lower edge, as Prometheus does
			}
			return lower + (b.le-lower)*(rank-below)/max(b.count-below, 1), total
		}
		lower, below = b.le, b.count
	}
	return lower, total
}
