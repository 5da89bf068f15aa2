package main

// Fault tests of the reservation crash windows (docs/semantics.md#crash-windows): a replica killed,
// stopped or frozen while it holds tasks reserved ahead of demand and not handed out. The rig is
// fault_helpers_test.go's.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/queuetest"
)

// stockUp has n workers that never answer ask rp for a task in one burst. The replica sizes its
// stock by the requests of the last 100 ms, so it reserves about twice n (within
// --reserve-batch), hands each request a task and keeps about n reserved and not handed out
// until they are a third of --reservation-ttl old, or the service has been idle 2 s. So that
// the burst is counted whole, a few requests first warm the replica's reserve path, and the
// burst is sent while the replica is stopped (SIGSTOP): it reads the requests together when it
// continues. It returns the tasks the warm-up and the burst were handed.
func stockUp(t *testing.T, rp *replicaProc, n int) []int64 {
	t.Helper()
	handed := askAll(t, rp, burstSockets(t, rp, "fault-warm", 4), nil)
	socks := burstSockets(t, rp, "fault-burst", n)
	cmd, _ := rp.current()
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	return append(handed, askAll(t, rp, socks, func() {
		time.Sleep(200 * time.Millisecond) // the requests reach the replica's socket buffers
		require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	})...)
}

// stockAtLeast sends bursts of n requests to rp (at most three) until it holds at least want
// reservations that no burst was handed: how much of a burst the replica sees in its first
// pass decides the stock it reserves, and on a loaded machine one burst may leave less. It
// returns every task handed out and the unhanded reservations counted after the last burst.
func (r *faultRig) stockAtLeast(rp *replicaProc, n, want int) ([]int64, int) {
	r.t.Helper()
	var handed []int64
	var held int
	for range 3 {
		handed = append(handed, stockUp(r.t, rp, n)...)
		ids, _ := unhanded(r.reservedBy(rp.name), handed)
		if held = len(ids); held >= want {
			break
		}
	}
	return handed, held
}

// burstSockets connects n DEALERs of distinct identities to rp's ventilator; they are closed
// when the test ends.
func burstSockets(t *testing.T, rp *replicaProc, prefix string, n int) []*zmq.Socket {
	t.Helper()
	socks := make([]*zmq.Socket, 0, n)
	for i := range n {
		d, err := zmq.NewSocket(zmq.DEALER)
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		socks = append(socks, d)
		require.NoError(t, d.SetLinger(0))
		require.NoError(t, d.SetIdentity(fmt.Sprintf("%s-%d-%d", prefix, i, rand.Int64())))
		require.NoError(t, d.SetRcvtimeo(20*time.Second))
		require.NoError(t, d.Connect(rp.ventilator))
	}
	time.Sleep(300 * time.Millisecond) // connected, so that the requests go out together
	return socks
}

// askAll sends one request on each socket, calls between (when not nil), and reads every reply;
// it returns the tasks handed out.
func askAll(t *testing.T, rp *replicaProc, socks []*zmq.Socket, between func()) []int64 {
	t.Helper()
	for _, d := range socks {
		_, err := d.Send(faultService, 0)
		require.NoError(t, err)
	}
	if between != nil {
		between()
	}
	var handed []int64
	for _, d := range socks {
		msg, err := d.RecvMessageBytes(0)
		require.NoError(t, err, "every request to %s is answered", rp.name)
		require.NotEmpty(t, msg)
		if id, err := strconv.ParseInt(string(msg[0]), 10, 64); err == nil && id != 0 {
			handed = append(handed, id)
		}
	}
	return handed
}

// reservedBy returns the tasks the replica named holds reserved, each with its reservation
// deadline.
func (r *faultRig) reservedBy(replica string) map[int64]time.Time {
	r.t.Helper()
	rows, err := r.pool.Query(r.ctx, `SELECT task_id, deadline FROM dispatch WHERE state = 'reserved' AND replica = $1`, replica)
	require.NoError(r.t, err)
	out := map[int64]time.Time{}
	for rows.Next() {
		var id int64
		var deadline time.Time
		require.NoError(r.t, rows.Scan(&id, &deadline))
		out[id] = deadline
	}
	require.NoError(r.t, rows.Err())
	return out
}

// unhanded returns the reserved tasks the burst was not handed, sorted, and their deadlines.
func unhanded(reserved map[int64]time.Time, handed []int64) ([]int64, []time.Time) {
	var ids []int64
	for id := range reserved {
		if !slices.Contains(handed, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	deadlines := make([]time.Time, len(ids))
	for i, id := range ids {
		deadlines[i] = reserved[id]
	}
	return ids, deadlines
}

// checkNoAttemptCounted requires each of the tasks ids, once finished, to have exactly one
// attempt in its run, accepted, by none of the replicas named in not, and leased no sooner than
// its reservation's deadline: the reservation counted no attempt. Attempts by workers whose
// names match the LIKE pattern handedTo (when not empty) are exempt: they are hand-outs of the
// lost replica whose attribution had not committed, recorded at the claim of their result (by
// any replica, the lost one too once it resumes). It returns how many attempts were so exempt.
func (r *faultRig) checkNoAttemptCounted(ids []int64, deadlines []time.Time, not []string, handedTo string) int {
	r.t.Helper()
	var good, early, exempt float64
	require.NoError(r.t, r.pool.QueryRow(r.ctx, `
		SELECT count(*) FILTER (WHERE n = 1 AND accepted = 1 AND by_not = 0)
		FROM (SELECT t.id, count(a.attempt) AS n,
		             count(*) FILTER (WHERE a.outcome = 'accepted') AS accepted,
		             count(*) FILTER (WHERE a.replica = ANY($2) AND ($3 = '' OR a.worker NOT LIKE $3)) AS by_not
		      FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id AND a.run = t.run
		      WHERE t.id = ANY($1) GROUP BY t.id) x`, ids, not, handedTo).Scan(&good))
	if int(good) != len(ids) {
		r.logAttempts(ids)
	}
	require.Equal(r.t, float64(len(ids)), good,
		"each task reserved by the lost replica has exactly one attempt, accepted, by another replica")
	require.NoError(r.t, r.pool.QueryRow(r.ctx, `
		SELECT count(*) FILTER (WHERE $3 = '' OR a.worker NOT LIKE $3),
		       count(*) FILTER (WHERE $3 <> '' AND a.worker LIKE $3)
		FROM attempts a JOIN unnest($1::bigint[], $2::timestamptz[]) AS u(id, deadline) ON a.task_id = u.id
		WHERE a.leased_at < u.deadline`, ids, deadlines, handedTo).Scan(&early, &exempt))
	require.Zero(r.t, early, "a task leased again before its reservation's deadline")
	return int(exempt)
}

// logAttempts logs the attempts of those of the tasks ids that have other than one, a failed
// test's evidence.
func (r *faultRig) logAttempts(ids []int64) {
	rows, err := r.pool.Query(r.ctx, `
		SELECT a.task_id, a.run, a.attempt, a.worker, a.replica, a.leased_at, coalesce(a.outcome, '-')
		FROM attempts a JOIN tasks t ON t.id = a.task_id AND t.run = a.run
		WHERE a.task_id = ANY($1)
		  AND a.task_id IN (SELECT task_id FROM attempts GROUP BY task_id HAVING count(*) <> 1)
		ORDER BY 1, 2, 3 LIMIT 40`, ids)
	if err != nil {
		r.t.Logf("attempts: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		v, err := rows.Values()
		if err == nil {
			r.t.Logf("attempt %v", v)
		}
	}
}

// duplicateMessages counts the messages of the corpus's tasks recorded more than once in a run.
func (r *faultRig) duplicateMessages() float64 {
	r.t.Helper()
	return r.mustScalar(`
		SELECT coalesce(sum(n - 1), 0) FROM (
			SELECT count(*) AS n FROM task_messages m JOIN tasks t ON t.id = m.task_id
			WHERE t.corpus_id = $1
			GROUP BY m.task_id, m.run, m.severity, m.category, m.what, m.details) g`, r.corpusID)
}

// TestFaultReservationKillNine kills with SIGKILL a replica holding at least 200 tasks reserved
// and not handed out: the other replica's reaper gives them back at their reservation deadline,
// with no attempt counted, and its workers finish every task, none lost, none recorded twice.
func TestFaultReservationKillNine(t *testing.T) {
	skipShortFault(t)
	const (
		tasks = 1500
		burst = 300
		ttl   = 5 * time.Second
	)
	rig := newFaultRig(t, queuetest.ConnString(t))
	rig.stage("reserve-kill9", "", tasks, faultKillPayload)
	victim := rig.addReplica("rk1", "--reservation-ttl", ttl.String(), "--reserve-batch", "1024", "--sync-archives=false")
	other := rig.addReplica("rk2", "--reservation-ttl", ttl.String(), "--sync-archives=false")
	rig.startReplicas()

	handed, held := rig.stockAtLeast(victim, burst, 200)
	require.GreaterOrEqual(t, held, 200, "%s holds at least 200 reservations not handed out (%d handed)", victim.name, len(handed))
	victim.kill9()
	killedAt := rig.dbNow()
	ids, deadlines := unhanded(rig.reservedBy(victim.name), handed)
	require.GreaterOrEqual(t, len(ids), 200, "reservations of %s left by kill -9", victim.name)
	require.True(t, killedAt.Before(slices.MinFunc(deadlines, time.Time.Compare)), "killed before its reservations' deadline")

	start := time.Now()
	rig.startWorkersOn("w", 2, 8, other)
	p := rig.waitFor("every task terminal after kill -9 of a replica with a stock", 2*time.Minute, allTerminal, nil)
	took := time.Since(start)
	p, a := rig.checkFinished()
	require.Equal(t, tasks, p.noProblem, "nothing lost: every task converted")
	rig.checkNoAttemptCounted(ids, deadlines, []string{victim.name}, "")
	released := rig.mustScalar(`SELECT coalesce(sum(released), 0) FROM reaper_passes`)
	require.GreaterOrEqual(t, released, float64(len(ids)), "the reaper released the dead replica's reservations")
	require.Zero(t, rig.mustScalar(`SELECT count(*) FROM dispatch WHERE state = 'reserved'`), "no reservation left")
	require.Zero(t, rig.duplicateMessages(), "no message recorded twice")
	t.Logf("fault numbers: kill -9 with a stock: %d tasks; %s held %d reservations not handed out (%d handed to a burst "+
		"of %d), %d left at the kill; reservation TTL %s; all terminal %s after the kill: %d NoProblem, %d attempts, "+
		"%d expired (the burst's); reaper released %.0f reservations",
		p.total, victim.name, held, len(handed), burst, len(ids), ttl, took.Round(time.Millisecond), p.noProblem,
		a.attempts, a.expired, released)
}

// TestFaultSIGTERMReturnsReservations sends SIGTERM to a replica with a stock of reserved
// tasks: they go back at once, while it still drains and long before their deadline — TODO
// again, with no attempt counted — and none is left when it exits.
func TestFaultSIGTERMReturnsReservations(t *testing.T) {
	skipShortFault(t)
	const (
		tasks = 600
		burst = 150
		drain = 5 * time.Second
	)
	rig := newFaultRig(t, queuetest.ConnString(t))
	rig.stage("reserve-sigterm", "", tasks, faultKillPayload)
	// The default --reservation-ttl, 30 s: nothing goes back by its deadline during this test.
	victim := rig.addReplica("rt1", "--reserve-batch", "1024", "--drain-timeout", drain.String())
	rig.startReplicas()

	handed, _ := rig.stockAtLeast(victim, burst, 50)
	ids, deadlines := unhanded(rig.reservedBy(victim.name), handed)
	require.GreaterOrEqual(t, len(ids), 50, "%s holds a stock (%d handed)", victim.name, len(handed))
	cmd, _ := victim.current()
	sent := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))

	// The burst never answers its tasks, so the replica drains for all of --drain-timeout; its
	// stock goes back at the start of it.
	var left float64
	for {
		left = rig.mustScalar(`SELECT count(*) FROM dispatch WHERE state = 'reserved' AND replica = $1`, victim.name)
		if left == 0 {
			break
		}
		require.True(t, victim.running(), "%s exited with %.0f reservations left", victim.name, left)
		time.Sleep(20 * time.Millisecond)
	}
	returnedAfter := time.Since(sent)
	require.True(t, victim.running(), "the stock went back while %s was still draining", victim.name)
	returnedAt := rig.dbNow()
	require.True(t, returnedAt.Before(slices.MinFunc(deadlines, time.Time.Compare)), "returned before the reservations' deadline")

	code, exited := victim.wait(drain + 30*time.Second)
	require.True(t, exited, "%s exits after SIGTERM", victim.name)
	require.Zero(t, code, "%s exits 0", victim.name)
	require.Zero(t, rig.mustScalar(`SELECT count(*) FROM dispatch WHERE state = 'reserved' AND replica = $1`, victim.name),
		"no reservation of %s left after it exits", victim.name)
	todo := rig.mustScalar(`SELECT count(*) FROM tasks t WHERE t.id = ANY($1) AND t.status = 0
		AND NOT EXISTS (SELECT 1 FROM dispatch d WHERE d.task_id = t.id)
		AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.task_id = t.id)`, ids)
	require.Equal(t, float64(len(ids)), todo, "every task of the stock is TODO again, with no dispatch row and no attempt")
	rig.checkInvariants()
	t.Logf("fault numbers: SIGTERM with a stock: %s held %d reservations not handed out (%d handed to a burst of %d); "+
		"all back %s after the signal, while it drained (--drain-timeout %s); it exited 0 with none left",
		victim.name, len(ids), len(handed), burst, returnedAfter.Round(time.Millisecond), drain)
}

// TestFaultFreezeReservations freezes (SIGSTOP) a replica holding a stock and leases in flight
// for longer than --reservation-ttl while the other replica's workers finish the work, then
// resumes it (SIGCONT): nothing is lost, nothing is recorded twice, and the resumed replica
// hands out none of its stale stock (requests sent to it while it was frozen get no work).
func TestFaultFreezeReservations(t *testing.T) {
	skipShortFault(t)
	const (
		// Enough that work remains when the bursts come: the workers return each result to the
		// replica that handed its task out, and drain a few thousand tasks in seconds.
		tasks  = 12000
		burst  = 200
		probes = 20
		// A stock is handed out until a third of the TTL old: 2 s, so that a reserve slowed by
		// the load of a 2-core machine still leaves one.
		ttl = 6 * time.Second
	)
	rig := newFaultRig(t, queuetest.ConnString(t))
	rig.stage("reserve-freeze", "", tasks, faultKillPayload)
	frozen := rig.addReplica("rf1", "--reservation-ttl", ttl.String(), "--reserve-batch", "1024", "--sync-archives=false")
	other := rig.addReplica("rf2", "--reservation-ttl", ttl.String(), "--sync-archives=false")
	rig.startReplicas()
	rig.startWorkersOn("a", 1, 8, frozen, other)
	rig.waitFor("work under way on both replicas", time.Minute, func(p faultProgress) bool { return p.terminal >= 100 }, nil)

	// Connected before the freeze, the probes' requests sent during it reach the replica as
	// soon as it resumes.
	probe := burstSockets(t, frozen, "fault-probe", probes)
	// The workers' requests compete with the burst, which may leave little stock.
	handed, _ := rig.stockAtLeast(frozen, burst, burst/2)
	cmd, _ := frozen.current()
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	stoppedAt := time.Now()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGCONT) })
	// A statement the replica sent just before it froze (an attribution of its last hand-outs)
	// still runs and commits in PostgreSQL: the snapshot of its stock waits for that.
	time.Sleep(time.Second)
	ids, deadlines := unhanded(rig.reservedBy(frozen.name), handed)
	require.GreaterOrEqual(t, len(ids), 50, "%s frozen holding a stock (%d handed)", frozen.name, len(handed))
	inFlight := rig.mustScalar(`SELECT count(*) FROM dispatch WHERE state = 'in_flight' AND replica = $1`, frozen.name)

	// The first workers' requests and results to the frozen replica wait in its sockets; a second
	// set, on the other replica alone, finishes the work.
	for _, w := range rig.workers {
		w.stop(syscall.SIGTERM, 5*time.Second)
	}
	rig.startWorkersOn("b", 1, 8, other)
	// A transaction the replica had begun as it froze (a claim, its locking reads done and its
	// write not sent) holds its tasks' rows until it resumes. Every other task finishes
	// meanwhile: wait until all are terminal, or those left have stayed locked for a while, past
	// every reservation's deadline.
	lastDeadline := slices.MaxFunc(deadlines, time.Time.Compare)
	held, stillHeld := 0, 0
	p := rig.waitFor("every task terminal, or held by the frozen replica, while it is frozen", 2*time.Minute, func(p faultProgress) bool {
		if !rig.dbNow().After(lastDeadline) {
			return false
		}
		if allTerminal(p) {
			return true
		}
		free, err := rig.scalar(`SELECT count(*) FROM (SELECT id FROM tasks WHERE corpus_id = $1 AND status IN (0, 1)
			FOR UPDATE SKIP LOCKED) x`, rig.corpusID)
		if err != nil || free > 0 || p.total-p.terminal != held {
			held, stillHeld = p.total-p.terminal, 0
			return false
		}
		stillHeld++
		return stillHeld >= 10
	}, nil)
	held = p.total - p.terminal
	require.Less(t, held, tasks/10, "only the tasks of a transaction the frozen replica began are left")

	// Requests sent while it is frozen reach it first thing when it resumes, with its stale
	// stock still in memory.
	frozenFor := time.Since(stoppedAt)
	var resumedAtDB time.Time
	got := askAll(t, frozen, probe, func() {
		time.Sleep(300 * time.Millisecond)
		frozenFor = time.Since(stoppedAt)
		resumedAtDB = rig.dbNow()
		require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	})
	var stale []int64
	for _, id := range got {
		if slices.Contains(ids, id) {
			stale = append(stale, id)
		}
	}
	require.Empty(t, stale, "the resumed replica handed out tasks of its stale stock")
	frozen.waitHealthy(t, 30*time.Second)
	// Its stock leaves it: at its next plan (older than a third of the TTL) or its next check.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := frozen.metric("cortexq_reserved")
		if err == nil && n == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the resumed replica still holds a stock (%v, %v)", n, err)
		time.Sleep(100 * time.Millisecond)
	}
	// Let it claim what its sink held: results of leases the reaper took back meanwhile.
	time.Sleep(2 * time.Second)
	// Hand-outs made just before the freeze whose attribution had not committed are skipped as
	// it resumes: the reaper took their reservations back meanwhile.
	skipped, err := frozen.metric("cortexq_attributions_skipped_total")
	require.NoError(t, err)
	require.True(t, frozen.running(), "the resumed replica stays up")
	rig.waitFor("every task terminal once the replica resumed", time.Minute, allTerminal, nil)

	p, a := rig.checkFinished()
	require.Equal(t, tasks, p.noProblem, "nothing lost: every task converted")
	// A hand-out made just before the freeze whose attribution was already sent, but waited for
	// rows a claim of the frozen replica held (its session ended after 60 s idle in its
	// transaction), commits late: it was handed out, not a reservation the replica sat on.
	// Such an attempt starts (its leased_at) when PostgreSQL runs the statement, which may be a
	// little after the freeze: anything of the frozen replica leased before it resumed was sent
	// before the freeze.
	ids, deadlines = handedBefore(rig, ids, deadlines, frozen.name, resumedAtDB)
	atClaim := rig.checkNoAttemptCounted(ids, deadlines, []string{frozen.name}, "fault-a%")
	require.Zero(t, rig.mustScalar(`SELECT count(*) FROM dispatch WHERE state = 'reserved'`), "no reservation left")
	require.Zero(t, rig.duplicateMessages(), "no message recorded twice")
	t.Logf("fault numbers: SIGSTOP past the TTL: %d tasks; %s frozen %s (reservation TTL %s) holding %d reservations "+
		"not handed out and %.0f leases in flight; the other replica finished the rest: %d NoProblem, %d attempts, %d expired, "+
		"%d tasks retried; %d held by a transaction of the frozen replica until it resumed; on SIGCONT %d requests "+
		"sent while frozen got none of its stale stock (%d got another task), and %.0f attributions of hand-outs "+
		"from before the freeze were skipped; %d hand-outs to the first workers not attributed at the freeze were "+
		"recorded at the claim of their results",
		p.total, frozen.name, frozenFor.Round(time.Millisecond), ttl, len(ids), inFlight, p.noProblem, a.attempts,
		a.expired, a.retried, held, probes, len(got), skipped, atClaim)
}

// handedBefore drops from ids (and deadlines) the tasks replica handed out before at (database
// clock): an attempt of its, leased before at, is on record.
func handedBefore(rig *faultRig, ids []int64, deadlines []time.Time, replica string, at time.Time) ([]int64, []time.Time) {
	rig.t.Helper()
	rows, err := rig.pool.Query(rig.ctx, `SELECT DISTINCT task_id FROM attempts WHERE task_id = ANY($1) AND replica = $2 AND leased_at < $3`,
		ids, replica, at)
	require.NoError(rig.t, err)
	handed := map[int64]bool{}
	for rows.Next() {
		var id int64
		require.NoError(rig.t, rows.Scan(&id))
		handed[id] = true
	}
	require.NoError(rig.t, rows.Err())
	var keptIDs []int64
	var keptDeadlines []time.Time
	for i, id := range ids {
		if !handed[id] {
			keptIDs, keptDeadlines = append(keptIDs, id), append(keptDeadlines, deadlines[i])
		}
	}
	if len(handed) > 0 {
		rig.t.Logf("%d tasks of the stock's snapshot were hand-outs from before the freeze, attributed late", len(handed))
	}
	return keptIDs, keptDeadlines
}
