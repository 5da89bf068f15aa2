package lease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// A replica's name belongs to one live process at a time: its start-up sweep removes the temp
// files of the name's other processes (docs/operations.md#one-process-a-name). The name is
// held as a PostgreSQL session-level advisory lock on a connection of its own, which the
// server drops as soon as that session ends: a process killed with kill -9 frees its name at
// once, a live one (running or frozen) keeps it. Through a transaction-mode pooler a session
// lock would stay on a server connection that other clients go on using, so there the
// heartbeat watch decides instead (CheckName).

// nameLockClass is the first key of the name lock (pg_advisory_lock(int4, int4)); the second is
// nameLockKey of the replica's name. The two-key form never meets River's one-key locks.
const nameLockClass int32 = 0x63717270 // "cqrp"

// nameLockKey is the second key of a replica name's lock.
func nameLockKey(replica string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(replica)) // a hash's Write never fails
	return int32(h.Sum32())
}

// nameLockWait is how long HoldName tries the lock before it counts as held by another process:
// the session of a process killed a moment before ends within milliseconds of its death, but
// the server notices only when it next reads that socket.
const nameLockWait = 2 * time.Second

// nameSessionSettings make the server itself drop the lock session of a process whose host
// has gone (a crash of the machine, a partition), within about 30 s, instead of the kernel's
// two hours: TCP keepalives on the server's side of the connection (ignored on a Unix socket).
var nameSessionSettings = []string{
	"SET tcp_keepalives_idle = 10",
	"SET tcp_keepalives_interval = 5",
	"SET tcp_keepalives_count = 3",
	"SET tcp_user_timeout = 30000",
}

// NameHeldError is returned when a live process holds this replica's name.
type NameHeldError struct {
	Replica string
	// Holder describes the holding process: its session, from pg_stat_activity.
	Holder string
	// PID is the holder's server process (0 when the holder was told by its heartbeat).
	PID int32
	// Beat is how long before the check its heartbeat was (the heartbeat watch only).
	Beat time.Duration
}

func (e *NameHeldError) Error() string {
	if e.PID != 0 {
		return fmt.Sprintf("replica name %q is held by a live replica (%s); give this one another --replica. "+
			"If that process is gone for good (its machine down), end its session: SELECT pg_terminate_backend(%d)",
			e.Replica, e.Holder, e.PID)
	}
	return fmt.Sprintf("replica name %q is held by a live replica (its heartbeat moved during the check, %s before it); "+
		"give this one another --replica", e.Replica, e.Beat.Round(time.Second))
}

// NameHold is this process's hold on its replica name (HoldName). Release lets it go.
type NameHold struct {
	store  *Store
	key    int32
	label  string
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	conn *pgx.Conn
}

// nameLabel is the application_name of the lock's session: what pg_stat_activity and a refused
// process show of the holder.
func nameLabel(replica string) string {
	host, _ := os.Hostname()
	label := fmt.Sprintf("cortexq replica %s host %s pid %d", replica, host, os.Getpid())
	if len(label) > 63 { // NAMEDATALEN-1: the server truncates longer names
		label = label[:63]
	}
	return label
}

// HoldName takes this replica's name for the life of the process: it returns a *NameHeldError
// at once if another live process holds it, and the hold otherwise. The hold outlives outages:
// when its session is lost it is taken again as soon as the database answers (a warning says
// so, an error if another process took the name meanwhile). Through a transaction-mode pooler
// (sessionLocks false) no lock can be held, and the heartbeat watch decides (CheckName); the
// hold returned then holds nothing.
func (s *Store) HoldName(ctx context.Context, sessionLocks bool) (*NameHold, error) {
	h := &NameHold{store: s, key: nameLockKey(s.cfg.Replica), label: nameLabel(s.cfg.Replica), done: make(chan struct{})}
	if !sessionLocks {
		close(h.done)
		h.cancel = func() {}
		return h, s.CheckName(ctx)
	}
	start := time.Now()
	conn, err := h.take(ctx, nameLockWait)
	if err != nil {
		return nil, err
	}
	s.logger.Info("holding this replica's name (a session lock: docs/operations.md#one-process-a-name)",
		"replica", s.cfg.Replica, "waited", time.Since(start).Round(time.Millisecond))
	h.conn = conn
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	go h.keep(kctx)
	return h, nil
}

// take opens the lock's session and takes the lock, trying for up to wait.
func (h *NameHold) take(ctx context.Context, wait time.Duration) (*pgx.Conn, error) {
	pc, err := h.store.pool.Acquire(ctx)
	if err != nil {
		return nil, translate("open the replica name's session", err)
	}
	conn := pc.Hijack() // the session is the lock's alone, for the life of the process
	fail := func(err error) (*pgx.Conn, error) {
		closeQuietly(conn)
		return nil, err
	}
	for _, set := range append(nameSessionSettings, "SET application_name = '"+strings.ReplaceAll(h.label, "'", "''")+"'") {
		if _, err := conn.Exec(ctx, set); err != nil {
			return fail(translate("set up the replica name's session", err))
		}
	}
	deadline := time.Now().Add(wait)
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", nameLockClass, h.key).Scan(&got); err != nil {
			return fail(translate("take the replica name's lock", err))
		}
		if got {
			return conn, nil
		}
		if !time.Now().Before(deadline) {
			return fail(h.heldBy(ctx, conn))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lockHolderQuery finds the session holding a two-key advisory lock, with what
// pg_stat_activity shows of it (sqlc knows no pg_locks: the one query written here).
const lockHolderQuery = `SELECT l.pid::int4, coalesce(a.application_name, ''), coalesce(host(a.client_addr), ''),
       a.backend_start
FROM pg_locks l
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = $1::int4::oid AND l.objid::int8 = $2::int8
LIMIT 1`

// lockHolder is a row of lockHolderQuery.
type lockHolder struct {
	Pid                         int32
	ApplicationName, ClientAddr string
	BackendStart                pgtype.Timestamptz
}

// heldBy describes the session that holds the name's lock as a *NameHeldError. A holder of
// another name (two names whose keys collide) falls back to the heartbeat watch.
func (h *NameHold) heldBy(ctx context.Context, conn *pgx.Conn) error {
	var r lockHolder
	err := conn.QueryRow(ctx, lockHolderQuery, nameLockClass, int64(uint32(h.key))).
		Scan(&r.Pid, &r.ApplicationName, &r.ClientAddr, &r.BackendStart)
	if errors.Is(err, pgx.ErrNoRows) { // let go in between: the next start takes it
		return fmt.Errorf("replica name %q was held a moment ago by another process, which has let it go; start again", h.store.cfg.Replica)
	}
	if err != nil {
		return translate("find the replica name's holder", err)
	}
	name := "cortexq replica " + h.store.cfg.Replica + " "
	if r.ApplicationName != "" && !strings.HasPrefix(r.ApplicationName+" ", name) {
		h.store.logger.Info("the replica name's lock key is another name's too; the heartbeat decides",
			"holder", r.ApplicationName)
		return h.store.CheckName(ctx)
	}
	holder := fmt.Sprintf("server pid %d", r.Pid)
	if r.ApplicationName != "" {
		holder = r.ApplicationName + ", " + holder
	}
	if r.ClientAddr != "" {
		holder += " from " + r.ClientAddr
	}
	if r.BackendStart.Valid {
		holder += ", connected " + r.BackendStart.Time.UTC().Format(time.RFC3339)
	}
	return &NameHeldError{Replica: h.store.cfg.Replica, Holder: holder, PID: r.Pid}
}

// keep watches the lock's session every heartbeat and, when it is lost (the database
// restarted, the link broke), takes the lock again on a new one.
func (h *NameHold) keep(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	lost, told := false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		conn := h.conn
		h.mu.Unlock()
		if conn != nil {
			pctx, cancel := context.WithTimeout(ctx, HeartbeatEvery)
			err := conn.Ping(pctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
			h.store.logger.Warn("the session holding this replica's name was lost; taking the name again when the database answers",
				"replica", h.store.cfg.Replica, "error", err)
			h.swap(nil)
			lost = true
		}
		conn, err := h.take(ctx, 0)
		var held *NameHeldError
		switch {
		case err == nil:
			h.swap(conn)
			if lost {
				h.store.logger.Info("this replica's name is held again", "replica", h.store.cfg.Replica)
			}
			lost, told = false, false
		case errors.As(err, &held) && !told:
			told = true // once: it stays so until one of the two stops
			h.store.logger.Error("another process took this replica's name while its session was lost: two processes now "+
				"run under one name; stop one", "replica", h.store.cfg.Replica, "holder", held.Holder)
		}
	}
}

// swap replaces the lock's session, closing the old one.
func (h *NameHold) swap(conn *pgx.Conn) {
	h.mu.Lock()
	old := h.conn
	h.conn = conn
	h.mu.Unlock()
	if old != nil {
		closeQuietly(old)
	}
}

// Release lets the name go: the lock's session ends.
func (h *NameHold) Release() {
	h.cancel()
	<-h.done
	h.swap(nil)
}

func closeQuietly(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx) // the session ends either way: the server sees the socket close
}

// nameLiveWithin is how recent a heartbeat must be for its replica to count as live.
const nameLiveWithin = 30 * time.Second

// CheckName reports a *NameHeldError if another live process holds this replica's name, by its
// heartbeat alone: where no session lock can hold the name (HoldName through a transaction-mode
// pooler). The heartbeat (replica_heartbeats) counts when it is recent, not a clean stop, and
// moves while CheckName watches it, for up to two heartbeats. A heartbeat that stays still is
// that of a process that died (kill -9): the name is free, after that wait
// (docs/operations.md#one-process-a-name).
func (s *Store) CheckName(ctx context.Context) error {
	q := dbsqlc.New(s.pool)
	read := func() (*dbsqlc.ReplicaHeartbeatOfRow, error) {
		rows, err := q.ReplicaHeartbeatOf(ctx, s.cfg.Replica)
		if err != nil || len(rows) == 0 {
			return nil, translate("read the replica's heartbeat", err)
		}
		return &rows[0], nil
	}
	first, err := read()
	if err != nil || first == nil || first.Stopped || first.Now.Sub(first.SeenAt) > nameLiveWithin {
		return err
	}
	watch := 2*HeartbeatEvery + time.Second // a beat is due within one interval and its flush tick
	s.logger.Info("another process of this replica's name beat recently; watching its heartbeat for up to "+watch.String()+
		" (two heartbeats): one that moves is a live process, one that stays still a dead one",
		"replica", s.cfg.Replica, "heartbeat_age", first.Now.Sub(first.SeenAt).Round(time.Millisecond))
	deadline := time.Now().Add(watch)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		cur, err := read()
		if err != nil {
			return err
		}
		if cur != nil && !cur.SeenAt.Equal(first.SeenAt) && !cur.Stopped {
			return &NameHeldError{Replica: s.cfg.Replica, Beat: cur.Now.Sub(cur.SeenAt)}
		}
		if cur == nil || cur.Stopped {
			return nil
		}
	}
	s.logger.Info("the heartbeat stayed still: its process is gone; the name is free", "replica", s.cfg.Replica)
	return nil
}
