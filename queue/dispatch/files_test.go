package dispatch

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/queuetest/leasetest"
)

// Sources are read, and results written, beneath their corpus's path only.

// waitAnswered waits until task id's dispatch row is marked answered (an unusable reply or
// an unreadable source, left to the reaper).
func (e *env) waitAnswered(id int64) {
	e.t.Helper()
	var answered bool
	require.Eventually(e.t, func() bool {
		err := e.pool.QueryRow(e.ctx, `SELECT answered FROM dispatch WHERE task_id = $1`, id).Scan(&answered)
		return err == nil && answered
	}, 10*time.Second, 20*time.Millisecond, "task %d's lease is marked answered", id)
}

// umask reads the process's umask without changing it (Umask would race other tests).
func umask(t *testing.T) os.FileMode {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			require.NoError(t, err)
			return os.FileMode(m)
		}
	}
	t.Fatal("no Umask line in /proc/self/status")
	return 0
}

func TestCorpusFiles(t *testing.T) {
	t.Run("EntryEditedOutsideTheCorpusIsNotRead", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(1, 100)
		secret := filepath.Join(t.TempDir(), "secret.zip")
		require.NoError(t, os.WriteFile(secret, sourceZip(t, 0, 100, 7), 0o600))
		_, err := e.pool.Exec(e.ctx, `UPDATE tasks SET entry = $1 WHERE id = $2`, secret, ids[0])
		require.NoError(t, err)
		p := newRawPeer(t, e, "reader")
		id, payload := p.lease("echo")
		require.Zero(t, id, "no task is sent (a payload of %d bytes)", len(payload))
		e.waitAnswered(ids[0])
		require.Equal(t, queue.StatusDispatched, e.status(ids[0]), "left to the reaper")
	})

	t.Run("SymlinkOutOfTheCorpusIsNotFollowed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(1, 100)
		secret := filepath.Join(t.TempDir(), "secret.zip")
		require.NoError(t, os.WriteFile(secret, sourceZip(t, 0, 100, 7), 0o600))
		entry := e.entry(ids[0])
		require.NoError(t, os.Remove(entry))
		require.NoError(t, os.Symlink(secret, entry))
		p := newRawPeer(t, e, "reader")
		id, payload := p.lease("echo")
		require.Zero(t, id, "no task is sent (a payload of %d bytes)", len(payload))
		e.waitAnswered(ids[0])
	})

	t.Run("FIFOAsAnEntryDoesNotHangTheVentilator", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(1, 100)
		entry := e.entry(ids[0])
		require.NoError(t, os.Remove(entry))
		require.NoError(t, syscall.Mkfifo(entry, 0o644))
		p := newRawPeer(t, e, "reader")
		id, _ := p.lease("echo")
		require.Zero(t, id, "no task is sent")
		e.waitAnswered(ids[0])
	})

	t.Run("SymlinkWithinTheCorpusIsFollowed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(2, 100)
		entry, other := e.entry(ids[0]), e.entry(ids[1])
		require.NoError(t, os.Remove(entry))
		rel, err := filepath.Rel(filepath.Dir(entry), other)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(rel, entry))
		want, err := os.ReadFile(other)
		require.NoError(t, err)
		p := newRawPeer(t, e, "reader")
		id, payload := p.lease("echo")
		require.Equal(t, ids[0], id)
		require.Equal(t, want, payload)
	})

	t.Run("ResultOfAnEntryOutsideTheCorpusIsNotWritten", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(1, 100)
		src, err := os.ReadFile(e.entry(ids[0]))
		require.NoError(t, err)
		// Leased by another replica, so this one looks the task up in the database, where its
		// entry has been edited to a directory outside the corpus.
		other := lease.New(e.pool, lease.Config{Replica: "r2", LeaseTimeout: time.Minute})
		leases, err := leasetest.Lease(e.ctx, other, leasetest.Request{ServiceID: e.svc, Workers: []string{"elsewhere"}})
		require.NoError(t, err)
		require.Len(t, leases, 1)
		outside := t.TempDir()
		_, err = e.pool.Exec(e.ctx, `UPDATE tasks SET entry = $1 WHERE id = $2`, filepath.Join(outside, "x.zip"), ids[0])
		require.NoError(t, err)
		p := newRawPeer(t, e, "elsewhere")
		p.result("echo", ids[0], src)
		e.waitAnswered(ids[0])
		left, err := os.ReadDir(outside)
		require.NoError(t, err)
		require.Empty(t, left, "nothing written outside the corpus")
		require.Equal(t, queue.StatusDispatched, e.status(ids[0]), "left to the reaper")
	})

	t.Run("ResultsAreReadableByAllUnderTheUmask", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ids := e.stage(2, 100)
		e.echoAll(1, false, ids)
		for _, id := range ids {
			fi, err := os.Stat(filepath.Join(filepath.Dir(e.entry(id)), "echo.zip"))
			require.NoError(t, err)
			require.Equal(t, 0o644&^umask(t), fi.Mode().Perm(), "task %d's result", id)
		}
	})
}
