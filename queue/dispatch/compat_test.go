package dispatch

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/wire"
)

// Compatibility with the upstream CorTeX workers (pericortex): what they send and how long
// they wait.

// logBuffer is a slog handler's output, safe to read while the server writes it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// withLogs sends the server's logs to b.
func withLogs(b *logBuffer) envOption {
	return func(_ *lease.Config, d *Config) {
		d.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

func TestCompat(t *testing.T) {
	t.Run("AMessageSizeOtherThanUpstreamsIsWarnedAbout", func(t *testing.T) {
		t.Parallel()
		for size, warned := range map[int]bool{0: false, wire.MessageSize: false, 50000: true} {
			var logs logBuffer
			newEnv(t, withLogs(&logs), func(_ *lease.Config, d *Config) { d.MessageSize = size })
			require.Equal(t, warned, strings.Contains(logs.String(), "payload chunks are not 100,000 bytes"), "message size %d", size)
		}
	})

	t.Run("EmptyResultIsLoggedCountedAndStaysUnusableInHistory", func(t *testing.T) {
		t.Parallel()
		clock := &testClock{}
		var logs logBuffer
		e := newEnv(t, withClock(clock), withLogs(&logs))
		ids := e.stage(1, 1000)
		// What pericortex sends when a conversion crashes: [identity, service, taskid, ""].
		p := newRawPeer(t, e, "crashy")
		id, _ := p.lease("echo")
		require.Equal(t, ids[0], id)
		p.result("echo", id, nil)
		e.waitOutcome(id, 1, 0, "unusable")
		require.Equal(t, 1.0, counterValue(e.server.metrics.unusable.WithLabelValues("empty")))
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "unusable result") }, 5*time.Second, 20*time.Millisecond)
		line := logs.String()[strings.Index(logs.String(), "unusable result"):]
		line = line[:strings.IndexByte(line, '\n')]
		require.Contains(t, line, "worker=crashy")
		require.Contains(t, line, "reason=empty")
		require.Contains(t, line, "task_id="+strconv.FormatInt(id, 10))

		// The reaper retries the task at its deadline; the crashed attempt stays unusable.
		clock.Advance(2 * time.Minute)
		require.Equal(t, 1, e.reap().Requeued)
		var outcome string
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT outcome FROM attempts WHERE task_id = $1 AND attempt = 0`, id).Scan(&outcome))
		require.Equal(t, "unusable", outcome)
		require.Equal(t, queue.StatusDispatched, e.status(id))
		var unusable, expired int64
		require.Eventually(t, func() bool {
			err := e.pool.QueryRow(e.ctx, `SELECT unusable, expired FROM audit_worker_activity WHERE worker = 'crashy'`).Scan(&unusable, &expired)
			return err == nil
		}, 10*time.Second, 50*time.Millisecond, "the worker's row is flushed")
		require.Equal(t, int64(1), unusable)
		require.Equal(t, int64(0), expired)

		// The retry is served and recorded.
		e.echoAll(1, false, ids)
	})

	t.Run("RequestsAreAnsweredWithinSecondsWhileTheDatabaseStallsOrTheReplicaDrains", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		p := newRawPeer(t, e, "patient")
		id, _ := p.lease("echo") // no task yet; the service is now known
		require.Zero(t, id)
		e.stage(3, 1000)

		// A lock the lease statement needs, held well past requestWait: the lease stalls.
		release := e.hold(`LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE`)

		// The upstream worker waits about a minute; here, a bound well under it.
		require.NoError(t, p.dealer.SetRcvtimeo(requestWait+3*time.Second))
		id, _ = p.lease("echo")
		require.Zero(t, id, "no work while the lease stalls")
		require.Equal(t, 1.0, counterValue(e.server.metrics.mocks.WithLabelValues("lease_slow")))
		require.EqualValues(t, 1, e.server.vent.leasing.Load(), "the lease transaction is still under way")

		// Draining: a request gets its answer at once, and a stalled one within requestWait.
		e.server.StopLeasing()
		q := newRawPeer(t, e, "late")
		require.NoError(t, q.dealer.SetRcvtimeo(requestWait+3*time.Second))
		id, _ = q.lease("echo")
		require.Zero(t, id)
		require.Equal(t, 1.0, counterValue(e.server.metrics.mocks.WithLabelValues("stopping")))

		// The lock goes: the stalled reservation commits, and since the replica drains, its
		// three tasks are given back at once, no attempt counted.
		release()
		require.Eventually(t, func() bool { return e.server.vent.leasing.Load() == 0 }, 20*time.Second, 20*time.Millisecond)
		require.Eventually(t, func() bool { return counterValue(e.server.metrics.returns) == 3 }, 10*time.Second, 20*time.Millisecond)
		require.Equal(t, 3, e.counts()[queue.StatusTODO])
		var attempts int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM attempts`).Scan(&attempts))
		require.Zero(t, attempts)
	})
}

// upstreamLease requests a task as the upstream LaTeX worker reads it: the task id, then
// payload frames until the first one shorter than wire.MessageSize, whatever RCVMORE says.
func upstreamLease(t *testing.T, p *rawPeer, service string) (string, []byte) {
	t.Helper()
	_, err := p.dealer.Send(service, 0)
	require.NoError(t, err)
	id, err := p.dealer.RecvBytes(0)
	require.NoError(t, err)
	var payload []byte
	for {
		frame, err := p.dealer.RecvBytes(0)
		require.NoError(t, err)
		payload = append(payload, frame...)
		if len(frame) < wire.MessageSize {
			return string(id), payload
		}
	}
}

func TestCompatAServiceLookupThatHangsStallsNoRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.stage(1, 1000)
	// The service is not cached yet, and its lookup waits on a lock.
	release := e.hold(`LOCK TABLE services IN ACCESS EXCLUSIVE MODE`)
	for _, name := range []string{"first", "second", "third"} {
		p := newRawPeer(t, e, name)
		require.NoError(t, p.dealer.SetRcvtimeo(requestWait+3*time.Second))
		id, _ := p.lease("echo")
		require.Zero(t, id, "%s gets no work while the lookup hangs", name)
	}
	require.Equal(t, 3.0, e.discarded("ventilator", "db_error"))
	// The lock goes: the service is found and its task leased.
	release()
	require.Eventually(t, func() bool {
		id, _ := newRawPeer(t, e, "after").lease("echo")
		return id != 0
	}, 10*time.Second, 100*time.Millisecond)
}

func TestCompatUpstreamWorkerReadsWholePayloadsAtTheDefaultMessageSize(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withWorkerCap(3)) // the emulated worker answers none of its three tasks
	p := newRawPeer(t, e, "upstream")
	// Sources under, over, and at an exact multiple of the chunk size (then a last empty frame).
	for _, size := range []int{1000, 250_000, 2 * wire.MessageSize} {
		dir := filepath.Join(e.dir, strconv.Itoa(size))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		entry := filepath.Join(dir, "source.zip")
		src := bytes.Repeat([]byte{'s'}, size)
		require.NoError(t, os.WriteFile(entry, src, 0o644))
		var task int64
		require.NoError(t, e.pool.QueryRow(e.ctx, `INSERT INTO tasks (service_id, corpus_id, entry) VALUES ($1, $2, $3) RETURNING id`,
			e.svc, e.corpus, entry).Scan(&task))
		id, payload := upstreamLease(t, p, "echo")
		require.Equal(t, strconv.FormatInt(task, 10), id)
		require.True(t, bytes.Equal(src, payload), "a %d-byte source arrives whole", size)
		_, err := p.dealer.RecvBytes(zmq.DONTWAIT)
		require.Error(t, err, "no frame is left over to be read as the next task id")
	}
}
