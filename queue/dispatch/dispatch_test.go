package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/worker"
)

func TestDispatch(t *testing.T) {
	t.Run("EightEchoWorkersConvertTwoHundredTasks", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(200, 150_000) // two chunks and a bit each
		stats, stop := e.workers(8)
		e.waitTerminal(60*time.Second, false)
		stop()
		e.requireEchoed(ids)
		require.Equal(t, uint64(200), stats.Tasks.Load(), "each task converted once")
		var attempts int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(DISTINCT worker) FROM attempts`).Scan(&attempts))
		require.Equal(t, 8, attempts, "eight distinct identities worked")
	})
}

func TestTorture(t *testing.T) {
	t.Run("MalformedFloodsLeaveRealTasksCorrect", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(100, 20_000)
		_, stop := e.workers(4)
		// 20,000 malformed sink messages and 20,000 malformed or unknown-service requests,
		// while the real tasks run.
		sinkFlood := func() {
			push, err := zmq.NewSocket(zmq.PUSH)
			require.NoError(t, err)
			defer push.Close()
			require.NoError(t, push.SetLinger(5*time.Second))
			require.NoError(t, push.Connect(e.sink))
			for i := range 20_000 {
				var err error
				switch i % 8 {
				case 0:
					_, err = push.SendMessage("only-one-frame")
				case 1:
					_, err = push.SendMessage("w", "echo", "12")
				case 2:
					_, err = push.SendMessage("w", "echo", "not-a-number", "data")
				case 3:
					_, err = push.SendMessage("w", "echo", "-5", "data")
				case 4:
					_, err = push.SendMessage("w", "no-such-service", "1", "data")
				case 5:
					_, err = push.SendMessage([]byte{0xff, 0xfe}, []byte{0xc0}, "99999999999999999999", "x")
				case 6:
					_, err = push.SendMessage("w", "../../etc", strconv.Itoa(i), "x")
				default:
					_, err = push.SendMessage("w", "echo", strconv.Itoa(1_000_000+i), "PK\x03\x04 not really")
				}
				require.NoError(t, err)
			}
		}
		ventFlood := func() {
			d, err := zmq.NewSocket(zmq.DEALER)
			require.NoError(t, err)
			defer d.Close()
			require.NoError(t, d.SetLinger(0))
			require.NoError(t, d.Connect(e.vent))
			for i := range 20_000 {
				var err error
				switch i % 5 {
				case 0:
					_, err = d.SendBytes(nil, 0)
				case 1:
					_, err = d.SendMessage("no-such-service")
				case 2:
					_, err = d.SendMessage("a/b")
				case 3:
					_, err = d.SendMessage(string(make([]byte, 300)))
				default:
					_, err = d.SendMessage("echo\x00", "extra", "frames")
				}
				require.NoError(t, err)
				if i%1000 == 999 { // read what came back so far; never block on it
					for {
						if _, err := d.RecvMessageBytes(zmq.DONTWAIT); err != nil {
							break
						}
					}
				}
			}
		}
		done := make(chan struct{}, 2)
		go func() { sinkFlood(); done <- struct{}{} }()
		go func() { ventFlood(); done <- struct{}{} }()
		<-done
		<-done
		e.waitTerminal(120*time.Second, false)
		stop()
		e.requireEchoed(ids)
		// Still responsive: a fresh task is served at once.
		more := e.stage(1, 100)
		p := newRawPeer(t, e, "after-flood")
		id, _ := p.lease("echo")
		require.Equal(t, more[0], id)
	})
}

func TestSizeCap(t *testing.T) {
	t.Run("ThreeQuartersAcceptedThreeTimesRejectedNothingLargeLeft", func(t *testing.T) {
		t.Parallel()
		const capBytes = 400_000
		e := newEnv(t, withMaxResult(capBytes))
		small := e.stage(1, capBytes*3/4-1000)
		big := e.stage(1, capBytes*3)
		e.echoAll(2, false, small)
		require.Equal(t, queue.StatusInvalid, e.status(big[0]))
		var what string
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT what FROM task_messages WHERE task_id = $1`, big[0]).Scan(&what))
		require.Equal(t, "result_too_large", what)
		err := filepath.Walk(e.dir, func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || filepath.Base(path) == "source.zip" {
				return err
			}
			require.LessOrEqual(t, info.Size(), int64(capBytes), "%s is over the cap", path)
			return nil
		})
		require.NoError(t, err)
		_, err = os.Stat(filepath.Join(filepath.Dir(e.entry(big[0])), "echo.zip"))
		require.ErrorIs(t, err, os.ErrNotExist, "no archive kept for the rejected result")
	})
}

func TestSaboteur(t *testing.T) {
	t.Run("ReaperRecoversFiftyLeasesOfAVanishedWorker", func(t *testing.T) {
		t.Parallel()
		clock := &testClock{}
		e := newEnv(t, withClock(clock), withWorkerCap(50))
		ids := e.stage(60, 1000)
		p := newRawPeer(t, e, "saboteur")
		for range 50 {
			id, payload := p.lease("echo")
			require.NotZero(t, id)
			require.NotEmpty(t, payload)
		}
		p.close()
		clock.Advance(2 * time.Minute) // past the one-minute lease
		require.Equal(t, 50, e.reap().Requeued)
		e.echoAll(4, false, ids)
		var retried int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(DISTINCT task_id) FROM attempts WHERE attempt = 1`).Scan(&retried))
		require.Equal(t, 50, retried, "each sabotaged task was retried once")
	})
}

func TestDisconnect(t *testing.T) {
	t.Run("WorkerGoneBetweenRequestAndReplyLosesNothing", func(t *testing.T) {
		t.Parallel()
		clock := &testClock{}
		e := newEnv(t, withClock(clock))
		ids := e.stage(40, 1000)
		for i := range 20 {
			d, err := zmq.NewSocket(zmq.DEALER)
			require.NoError(t, err)
			require.NoError(t, d.SetLinger(0))
			require.NoError(t, d.SetIdentity(fmt.Sprintf("ghost-%d", i)))
			require.NoError(t, d.Connect(e.vent))
			_, err = d.SendMessage("echo")
			require.NoError(t, err)
			require.NoError(t, d.Close()) // gone before any reply
		}
		time.Sleep(200 * time.Millisecond) // let the ventilator serve the ghosts
		clock.Advance(2 * time.Minute)
		e.reap()
		e.echoAll(3, true, ids)
	})

	t.Run("TwoWorkersWithOneIdentityLoseNothing", func(t *testing.T) {
		t.Parallel()
		clock := &testClock{}
		e := newEnv(t, withClock(clock))
		ids := e.stage(60, 1000)
		same := func(c *worker.Config) { c.Identity = "twin"; c.Concurrency = 1 }
		_, stop1 := e.workers(1, same)
		_, stop2 := e.workers(1, same)
		deadline := time.Now().Add(90 * time.Second)
		for {
			c := e.counts()
			if c[queue.StatusTODO]+c[queue.StatusDispatched] == 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "tasks left: %v", c)
			// A reply routed to the other twin is lost in transit: the reaper recovers it.
			clock.Advance(2 * time.Minute)
			e.reap()
			time.Sleep(300 * time.Millisecond)
		}
		stop1()
		stop2()
		e.requireEchoed(ids)
	})
}

func TestLateResults(t *testing.T) {
	t.Run("AfterRequeueAfterDeadLetterAndStaleAfterRerun", func(t *testing.T) {
		t.Parallel()
		clock := &testClock{}
		e := newEnv(t, withClock(clock))
		ids := e.stage(3, 500)
		requeued, dead, stale := ids[0], ids[1], ids[2]
		src := func(id int64) []byte {
			b, err := os.ReadFile(e.entry(id))
			require.NoError(t, err)
			return b
		}
		p := newRawPeer(t, e, "late")
		id, payload := p.lease("echo")
		require.Equal(t, requeued, id)
		require.Equal(t, src(requeued), payload)

		// After a requeue: the late result is recorded and the retry is not leased.
		clock.Advance(2 * time.Minute)
		require.Equal(t, 1, e.reap().Requeued)
		p.result("echo", requeued, payload)
		e.waitStatus(requeued, queue.StatusNoProblem)
		e.waitOutcome(requeued, 1, 0, "accepted")

		// After a dead letter: three attempts, all expired; the first one's result replaces the
		// stand-in Fatal.
		q := newRawPeer(t, e, "slow")
		id, payload = q.lease("echo")
		require.Equal(t, dead, id)
		for i := range 2 {
			clock.Advance(10 * time.Minute)
			e.reap()
			r := newRawPeer(t, e, fmt.Sprintf("slow-%d", i))
			id, _ = r.lease("echo")
			require.Equal(t, dead, id, "the retry is leased")
		}
		clock.Advance(30 * time.Minute)
		require.Equal(t, 1, e.reap().DeadLettered)
		require.Equal(t, queue.StatusFatal, e.status(dead))
		q.result("echo", dead, payload)
		e.waitStatus(dead, queue.StatusNoProblem)

		// Stale after a rerun: the old run's result does not land.
		s := newRawPeer(t, e, "stale")
		id, payload = s.lease("echo")
		require.Equal(t, stale, id)
		_, err := e.store.Rerun(e.ctx, lease.RerunScope{CorpusID: e.corpus, ServiceID: e.svc, Statuses: []queue.Status{queue.StatusDispatched}})
		require.NoError(t, err)
		s.result("echo", stale, payload)
		e.waitOutcome(stale, 1, 0, "stale")
		require.Equal(t, queue.StatusTODO, e.status(stale))
		_, err = os.Stat(filepath.Join(filepath.Dir(e.entry(stale)), "echo.zip"))
		require.ErrorIs(t, err, os.ErrNotExist, "a stale result publishes nothing")
	})
}

func TestInterop(t *testing.T) {
	t.Run("PythonZeroMQWorkerEndToEnd", func(t *testing.T) {
		t.Parallel()
		python := "/usr/bin/python3" // Debian's python3-zmq serves the system interpreter
		e := newEnv(t)
		ids := e.stage(10, 250_000)
		ctx, cancel := context.WithTimeout(e.ctx, 90*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, python, "testdata/echo_worker.py", e.vent, e.sink, "echo", "py-worker", "10").CombinedOutput()
		require.NoError(t, err, "python worker (apt-get install python3-zmq): %s", out)
		e.waitTerminal(30*time.Second, false)
		e.requireEchoed(ids)
		var workers []string
		rows, err := e.pool.Query(e.ctx, `SELECT DISTINCT worker FROM attempts`)
		require.NoError(t, err)
		for rows.Next() {
			var w string
			require.NoError(t, rows.Scan(&w))
			workers = append(workers, w)
		}
		require.Equal(t, []string{"py-worker"}, workers)
	})
}

// TestDrainWaitsForReservationUnderWay: Drain does not return while a reservation is under
// way, and the reservation, committed after the drain began, is given back at once: the task
// is TODO again, with no row and no attempt.
func TestDrainWaitsForReservationUnderWay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.stage(1, 1000)

	// Hold the reservation up: its write waits for this lock.
	blocker, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer blocker.Rollback(e.ctx)
	_, err = blocker.Exec(e.ctx, `LOCK TABLE attempts IN SHARE ROW EXCLUSIVE MODE`)
	require.NoError(t, err)

	_, stop := e.workers(1)
	defer stop()
	require.Eventually(t, func() bool { return e.server.vent.leasing.Load() == 1 }, 10*time.Second, 5*time.Millisecond,
		"a reservation under way")

	drained := make(chan int, 1)
	go func() { drained <- e.server.Drain(e.ctx, 20*time.Second) }()
	select {
	case left := <-drained:
		t.Fatalf("Drain returned (%d unanswered) while a reservation was under way", left)
	case <-time.After(300 * time.Millisecond):
	}
	require.Zero(t, e.server.InFlight(), "nothing is handed out")

	require.NoError(t, blocker.Rollback(e.ctx))
	select {
	case left := <-drained:
		require.Zero(t, left)
	case <-time.After(20 * time.Second):
		t.Fatal("Drain did not return after the reservation was given back")
	}
	require.Equal(t, queue.StatusTODO, e.status(ids[0]))
	var rows, attempts int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM dispatch), (SELECT count(*) FROM attempts)`).Scan(&rows, &attempts))
	require.Zero(t, rows, "dispatch rows left")
	require.Zero(t, attempts, "attempts counted")
}

func TestClaimRolledBackPutsTheEarlierArchiveBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.stage(2, 500)
	target := func(id int64) string { return filepath.Join(filepath.Dir(e.entry(id)), "echo.zip") }
	// Task 0 has a result of an earlier run on disk; task 1 has none.
	earlier := []byte("EARLIER ARCHIVE")
	require.NoError(t, os.WriteFile(target(ids[0]), earlier, 0o644))
	// Every claim that records a status fails inside PostgreSQL, until the trigger goes.
	e.failClaims()

	p := newRawPeer(t, e, "w")
	var payloads [][]byte
	for range ids {
		id, payload := p.lease("echo")
		require.NotZero(t, id)
		payloads = append(payloads, payload)
	}
	for i, id := range ids {
		p.result("echo", id, payloads[i])
	}
	// The claims fail and are retried (after 250 ms, 500 ms, …): between tries, the earlier
	// archive is in place, and no archive where there was none.
	require.Eventually(t, func() bool {
		return counterValue(e.server.metrics.dbErrors.WithLabelValues("claim")) >= 2
	}, 20*time.Second, 10*time.Millisecond)
	got, err := os.ReadFile(target(ids[0]))
	require.NoError(t, err)
	require.Equal(t, earlier, got, "the earlier archive stands while the claim does not commit")
	_, err = os.Stat(target(ids[1]))
	require.ErrorIs(t, err, os.ErrNotExist, "no archive published by a claim that did not commit")
	require.Equal(t, queue.StatusDispatched, e.status(ids[0]))

	// Once the database takes the claim, the results land, and nothing is left beside them.
	_, err = e.pool.Exec(e.ctx, `DROP TRIGGER fail_claims ON tasks`)
	require.NoError(t, err)
	e.waitStatus(ids[0], queue.StatusNoProblem)
	e.waitStatus(ids[1], queue.StatusNoProblem)
	e.requireEchoed(ids)
	for _, id := range ids {
		left, err := filepath.Glob(filepath.Join(filepath.Dir(e.entry(id)), ".*"))
		require.NoError(t, err)
		require.Empty(t, left, "no temp or kept archive left")
	}
}

// A frame over 2 GiB would reach the sink silently cut to 2 GiB − 1 (sizes pass through a C
// int): the sink's frame limit never lets one through.
func TestSinkFrameLimitStaysUnderTwoGiB(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(32<<10), sinkFrameMax(16<<10))
	require.Equal(t, int64(math.MaxInt32), sinkFrameMax(MaxResultBytesDefault))
	require.Equal(t, int64(math.MaxInt32), sinkFrameMax(math.MaxInt64))
}

// Two accepted results of one task in one batch publish to one target; a rollback undoes them
// latest first, so the earlier archive is back and each result is at its own temp name.
func TestUnpublishUndoesLatestFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "echo.zip")
	require.NoError(t, os.WriteFile(target, []byte("O"), 0o644))
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	mk := func(data string) *item {
		it := &item{result: lease.Result{TaskID: 1}, file: archive.Pending{Target: target, TaskID: 1}}
		require.NoError(t, it.file.Write(dir, [][]byte{[]byte(data)}))
		return it
	}
	// temps reads the temp archives beside the target, sorted.
	temps := func() []string {
		names, err := filepath.Glob(filepath.Join(dir, ".echo.zip.tmp-*"))
		require.NoError(t, err)
		var out []string
		for _, n := range names {
			out = append(out, read(n))
		}
		slices.Sort(out)
		return out
	}
	s := &claimers{core: &core{logger: testLogger(t)}}
	rolledBack := &pgconn.PgError{Code: "40P01"}

	a, b := mk("A"), mk("B")
	pubs := &publishes{}
	for _, it := range []*item{a, b} {
		require.NoError(t, it.file.Publish())
		pubs.order = append(pubs.order, it)
	}
	require.Equal(t, "B", read(target))
	require.Empty(t, temps())
	s.unpublishAfter(pubs, lease.RolledBack(rolledBack))
	require.Equal(t, "O", read(target))
	require.Equal(t, []string{"A", "B"}, temps(), "each result back at a temp name")

	// Once a try may have committed (a connection lost), no later failure undoes anything.
	for _, it := range []*item{a, b} {
		require.NoError(t, it.file.Publish())
		pubs.order = append(pubs.order, it)
	}
	s.unpublishAfter(pubs, lease.RolledBack(errors.New("connection reset after COMMIT was sent")))
	s.unpublishAfter(pubs, lease.RolledBack(rolledBack))
	require.Equal(t, "B", read(target), "what may have committed stays published")
}

// TestClaimTryThatDidNotBeginDidNotCommit: a try whose BeginClaim failed (here: its context
// ended; in production a link lost before round trip 1 was answered) sent no COMMIT, so it
// reports that it certainly did not commit, and the claim's earlier publishes may still be
// put back when a later try rolls back.
func TestClaimTryThatDidNotBeginDidNotCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.stage(1, 500)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	it := &item{result: lease.Result{TaskID: ids[0], Worker: "w1"}}
	results := []lease.Result{it.result}
	index := map[*lease.Result]*item{&results[0]: it}
	_, rolledBack, err := e.server.claims.claimTry(ctx, []*item{it}, results, index, &publishes{}, func(time.Duration) {})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, rolledBack, "a claim that never began cannot have committed")
}

// Accepted results of two attempts of one task, come together while PostgreSQL refuses claims a
// few times (a claimer holds the later one for the batch after the earlier's: claimers.gather):
// once the claims are taken, the archive is the result that stands.
func TestTwoAttemptsWhileClaimsRollBack(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := newEnv(t, withClock(clock), func(_ *lease.Config, d *Config) { d.ClaimFlush = 300 * time.Millisecond })
	ids := e.stage(1, 500)
	target := filepath.Join(filepath.Dir(e.entry(ids[0])), "echo.zip")
	w1 := newRawPeer(t, e, "w1")
	id, _ := w1.lease("echo")
	require.Equal(t, ids[0], id)
	clock.Advance(2 * time.Minute)
	require.Equal(t, 1, e.reap().Requeued)
	w2 := newRawPeer(t, e, "w2")
	id, _ = w2.lease("echo")
	require.Equal(t, ids[0], id)
	require.NoError(t, os.WriteFile(target, []byte("EARLIER ARCHIVE"), 0o644))
	e.failClaims()
	first, second := sourceZip(t, 0, 500, 101), sourceZip(t, 0, 500, 202)
	w1.result("echo", id, first)
	w2.result("echo", id, second)
	require.Eventually(t, func() bool {
		return counterValue(e.server.metrics.dbErrors.WithLabelValues("claim")) >= 1
	}, 20*time.Second, 5*time.Millisecond)
	_, err := e.pool.Exec(e.ctx, `DROP TRIGGER fail_claims ON tasks`)
	require.NoError(t, err)
	e.waitOutcome(id, 1, 1, "accepted")
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, second, got, "the newer attempt's result stands, on disk as in the database")
	// The kept-aside archive goes once the claim has committed, just after the outcome shows.
	var left []string
	for range 1000 { // bounded: 10 s
		left, err = filepath.Glob(filepath.Join(filepath.Dir(target), ".*"))
		require.NoError(t, err)
		if len(left) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Empty(t, left, "files left beside the result")
}

// failClaims makes every claim that records a status fail inside PostgreSQL, until the trigger
// fail_claims is dropped.
func (e *env) failClaims() {
	e.t.Helper()
	_, err := e.pool.Exec(e.ctx, `
		CREATE FUNCTION fail_claims() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'injected claim failure'; END$$;
		CREATE TRIGGER fail_claims BEFORE UPDATE OF status ON tasks
		FOR EACH ROW WHEN (NEW.status < 0) EXECUTE FUNCTION fail_claims();`)
	require.NoError(e.t, err)
}
