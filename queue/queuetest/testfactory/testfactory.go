// Package testfactory inserts the rows tests start from: corpora, services, tasks, and dispatch
// rows in any state, each one small function taking the database and a struct of options whose
// zero fields take defaults (River's rivershared/testfactory is the model). It stages states
// directly, without the transitions, so it imports no dispatcher package: queue/lease's own tests
// use it as well as the packages above lease. To drive a lease.Store instead, see
// queue/queuetest/leasetest.
package testfactory

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Must(v, err)(t) fails the test on err and returns v.
func Must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

// DBNow reads the database clock.
func DBNow(ctx context.Context, t testing.TB, db dbsqlc.DBTX) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT now()").Scan(&now))
	return now
}

// CorpusOpts are the options of Corpus.
type CorpusOpts struct {
	Name string // default "corpus"
	Path string // default "/" + Name
	// ParentID makes the corpus a sandbox of that corpus.
	ParentID *int32
}

// Corpus inserts a corpus.
func Corpus(ctx context.Context, t testing.TB, db dbsqlc.DBTX, opts *CorpusOpts) dbsqlc.Corpora {
	t.Helper()
	o := deref(opts)
	if o.Name == "" {
		o.Name = "corpus"
	}
	if o.Path == "" {
		o.Path = "/" + o.Name
	}
	c, err := dbsqlc.New(db).CorpusCreate(ctx, o.Name, o.Path, o.ParentID)
	require.NoError(t, err)
	return c
}

// ServiceOpts are the options of Service.
type ServiceOpts struct {
	Name string // default "echo"
	// LeaseTimeout is the service's own lease, in whole seconds; zero: the replica's default.
	LeaseTimeout time.Duration
}

// Service inserts a service.
func Service(ctx context.Context, t testing.TB, db dbsqlc.DBTX, opts *ServiceOpts) dbsqlc.Service {
	t.Helper()
	o := deref(opts)
	if o.Name == "" {
		o.Name = "echo"
	}
	var secs *int32
	if o.LeaseTimeout > 0 {
		s := int32(o.LeaseTimeout / time.Second)
		secs = &s
	}
	svc, err := dbsqlc.New(db).ServiceCreate(ctx, o.Name, secs)
	require.NoError(t, err)
	return svc
}

// entrySeq numbers the default entries of Task.
var entrySeq atomic.Int64

// TaskOpts are the options of Task. ServiceID and CorpusID are required.
type TaskOpts struct {
	ServiceID int32
	CorpusID  int32
	// Entry defaults to /corpus/<n>/source.zip, n unique in the test process.
	Entry string
}

// Task inserts a TODO task and returns its id.
func Task(ctx context.Context, t testing.TB, db dbsqlc.DBTX, opts *TaskOpts) int64 {
	t.Helper()
	o := deref(opts)
	require.NotZero(t, o.ServiceID, "testfactory.Task needs a ServiceID")
	require.NotZero(t, o.CorpusID, "testfactory.Task needs a CorpusID")
	if o.Entry == "" {
		o.Entry = fmt.Sprintf("/corpus/%d/source.zip", entrySeq.Add(1))
	}
	var id int64
	err := db.QueryRow(ctx, `INSERT INTO tasks (service_id, corpus_id, entry) VALUES ($1, $2, $3) RETURNING id`,
		o.ServiceID, o.CorpusID, o.Entry).Scan(&id)
	require.NoError(t, err)
	return id
}

// LeasedOpts are the options of Leased. ServiceID, CorpusID and Workers are required.
type LeasedOpts struct {
	ServiceID int32
	CorpusID  int32
	Entry     string // as TaskOpts.Entry
	// Workers had the attempts of run 1, in order: the current attempt is the last one's, and
	// retries is len(Workers)-1.
	Workers []string
	// LeasedAt is when the current attempt was leased, and every earlier one.
	LeasedAt time.Time
	// LeaseTimeout is the lease captured in the row; default an hour.
	LeaseTimeout time.Duration
	Replica      string // default "r1"
}

// Leased inserts a task dispatched in run 1: an in-flight dispatch row whose deadline is
// LeasedAt + len(Workers) × LeaseTimeout, and an attempts row for each worker. It returns the
// task's id.
func Leased(ctx context.Context, t testing.TB, db dbsqlc.DBTX, opts *LeasedOpts) int64 {
	t.Helper()
	o := deref(opts)
	require.NotEmpty(t, o.Workers, "testfactory.Leased needs Workers")
	if o.LeaseTimeout <= 0 {
		o.LeaseTimeout = time.Hour
	}
	if o.Replica == "" {
		o.Replica = "r1"
	}
	id := Task(ctx, t, db, &TaskOpts{ServiceID: o.ServiceID, CorpusID: o.CorpusID, Entry: o.Entry})
	retries := int32(len(o.Workers) - 1)
	Dispatch(ctx, t, db, dbsqlc.Dispatch{
		TaskID: id, Run: 1, State: "in_flight", AttemptWorkers: o.Workers,
		Deadline: o.LeasedAt.Add(time.Duration(retries+1) * o.LeaseTimeout), Replica: o.Replica,
		ServiceID: o.ServiceID, Retries: retries, LeaseTimeoutSeconds: int32(o.LeaseTimeout / time.Second),
		LeasedAt: o.LeasedAt,
	})
	_, err := db.Exec(ctx, `UPDATE tasks SET status = 1 WHERE id = $1`, id)
	require.NoError(t, err)
	for i, w := range o.Workers {
		_, err := db.Exec(ctx, `INSERT INTO attempts (task_id, run, attempt, worker, replica, leased_at) VALUES ($1, 1, $2, $3, $4, $5)`,
			id, i, w, o.Replica, o.LeasedAt)
		require.NoError(t, err)
	}
	return id
}

// Dispatch writes whole dispatch rows, inserting new ones and overwriting the state of existing
// ones (by task and run): tests stage with it states the transitions would take many steps to
// reach.
func Dispatch(ctx context.Context, t testing.TB, db dbsqlc.DBTX, rows ...dbsqlc.Dispatch) {
	t.Helper()
	doc, err := json.Marshal(rows)
	require.NoError(t, err)
	require.NoError(t, DispatchJSON(ctx, db, doc))
}

// DispatchJSON is Dispatch for rows given as a JSON array of dispatch records, returning the
// error: for a test whose rows the schema must refuse, or that writes inside its own transaction.
func DispatchJSON(ctx context.Context, db dbsqlc.DBTX, doc []byte) error {
	_, err := db.Exec(ctx, dispatchUpsertSQL, doc)
	return err
}

const dispatchUpsertSQL = `
INSERT INTO dispatch (task_id, run, state, attempt_workers, deadline, answered, finished_attempt, finished_status, queued, replica, service_id, retries, lease_timeout_seconds, leased_at, dead_lettered, last_cause, forget_at, received_at)
SELECT r.task_id, r.run, r.state, r.attempt_workers, r.deadline, r.answered, r.finished_attempt, r.finished_status, r.queued, r.replica, r.service_id, r.retries, r.lease_timeout_seconds, r.leased_at, r.dead_lettered, r.last_cause, r.forget_at, r.received_at
FROM jsonb_populate_recordset(NULL::dispatch, $1::jsonb) AS r
ON CONFLICT (task_id, run) DO UPDATE SET
    state = excluded.state,
    attempt_workers = excluded.attempt_workers,
    deadline = excluded.deadline,
    answered = excluded.answered,
    finished_attempt = excluded.finished_attempt,
    finished_status = excluded.finished_status,
    queued = excluded.queued,
    replica = excluded.replica,
    retries = excluded.retries,
    lease_timeout_seconds = excluded.lease_timeout_seconds,
    leased_at = excluded.leased_at,
    dead_lettered = excluded.dead_lettered,
    last_cause = excluded.last_cause,
    forget_at = excluded.forget_at,
    received_at = excluded.received_at`

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
