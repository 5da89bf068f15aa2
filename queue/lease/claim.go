package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Kind is what a worker's reply carries.
type Kind int

// The kinds of reply.
const (
	// KindReport is a result with a verdict: its status and messages.
	KindReport Kind = iota
	// KindRetryable is a retryable cause (a timeout, an out-of-memory shed, a crash): the task's
	// retry budget decides what happens (decideRetryable).
	KindRetryable
	// KindUnusable is a reply that could not be used (empty or unreadable archive): the task
	// stays in flight for the reaper, marked answered.
	KindUnusable
)

// Result is one reply from a worker for a task.
type Result struct {
	TaskID int64
	Worker string
	// Key, when set, is the name of the CURVE key the reply was authenticated with: the reply is
	// then attributed only to an attempt of a worker of that key (KeyedWorker), and dropped as
	// OutcomeNotHolder when the key held none. Empty: the reference's rule.
	Key string
	// ServiceID is the service the worker named; a result for another service than the task's is
	// dropped (OutcomeWrongService). Zero skips the check.
	ServiceID int32
	Kind      Kind
	// Status and Messages are the report (KindReport) or the cause (KindRetryable).
	Status   queue.Status
	Messages []queue.Message
	// HandedOut is when this replica handed the task out to Worker, by its monotonic clock, if
	// it did and the hand-out was not attributed yet: a claim that records the attempt dates
	// its lease that long before the claim's database clock. Zero: the claim's clock.
	HandedOut time.Time
	// Archive is the result archive the claim publishes, recorded with an accepted attempt for
	// `cortexq verify` (nil: none recorded).
	Archive *ArchiveRecord
	// Stages are the attempt's stage times the dispatcher measured so far (nil: none), recorded
	// with an accepted attempt; the claim adds the wait in TODO and its own (attemptStages).
	Stages *queue.Stages
	// Report is the result's cortex.log as the sink parsed it (nil: a stand-in the sink made,
	// or no log). What an accepted attempt records of the worker's report beyond its status and
	// messages is read from here (writes.accepted).
	Report *queue.Report
	// Queued is when the result was queued for its claim, and ReservedAt when this replica's
	// reservation of the task came back (monotonic clock; zero: unknown).
	Queued, ReservedAt time.Time
	// kinds are the message_kinds ids of Messages, in order (Store.resultKinds).
	kinds []int32
}

// ArchiveRecord is what an accepted attempt records of its result archive: its size and SHA-256
// (migrations/00030_result_digests.sql). A Size of -1 records that no archive is kept (a result
// too large: the earlier archive is removed).
type ArchiveRecord struct {
	Size   int64
	Digest []byte
}

// Decision is what Claim decided for one Result.
type Decision struct {
	Result  *Result
	Outcome Outcome
	// Reason says why a result was dropped, for the log.
	Reason string
	// The task as stored, when known.
	TaskID    int64
	Run       int32
	ServiceID int32
	CorpusID  int32
	Entry     string
	// Attempt is the 0-based attempt within the run the result was attributed to; Attempts is how
	// many attempts the run had.
	Attempt  int
	Attempts int
	// Late says why an accepted result came late; Replaced is the accepted result it replaced.
	Late     Late
	Replaced *Finished
	// Status is the task's recorded status after an accepted result or a stand-in.
	Status queue.Status
	// AttributedAtClaim is set when the task was reserved, not yet attributed: the reply's
	// attempt was recorded by this claim (a hand-out's attribution lost the race, or its replica
	// died before it).
	AttributedAtClaim bool
}

// PublishFunc publishes an accepted result's archive (renames it into place) inside the claim's
// transaction. An error drops that one result: the task stays exactly as it was, and the result
// it would have replaced stands.
type PublishFunc func(d *Decision) error

// claimTask is a task a claim decides results for, with its dispatch rows, all locked.
type claimTask struct {
	task dbsqlc.TaskLockForClaimRow
	rows []*dbsqlc.Dispatch
}

// lockedTasks is what a transaction that decides on tasks reads first, locked: the tasks, then
// their dispatch rows (every run's kept row).
type lockedTasks struct {
	tasks []dbsqlc.TaskLockForClaimRow
	rows  []dbsqlc.Dispatch
}

// lockTasks reads ids' tasks and their dispatch rows, locking them in that order.
func lockTasks(ctx context.Context, q *dbsqlc.Queries, ids []int64) (lockedTasks, error) {
	var got lockedTasks
	var err error
	if got.tasks, err = q.TaskLockForClaim(ctx, ids); err != nil {
		return got, fmt.Errorf("lock tasks: %w", err)
	}
	if got.rows, err = q.DispatchLockForTasks(ctx, ids); err != nil {
		return got, fmt.Errorf("lock dispatch rows: %w", err)
	}
	return got, nil
}

// byTask groups the rows read under their tasks.
func (got lockedTasks) byTask() map[int64]*claimTask {
	m := make(map[int64]*claimTask, len(got.tasks))
	for _, t := range got.tasks {
		m[t.ID] = &claimTask{task: t}
	}
	for i := range got.rows {
		if ct := m[got.rows[i].TaskID]; ct != nil {
			ct.rows = append(ct.rows, &got.rows[i])
		}
	}
	return m
}

// ClaimHooks are the caller's steps inside a claim transaction.
type ClaimHooks struct {
	// Publish is called for each accepted result and stand-in (see PublishFunc).
	Publish PublishFunc
	// BeforeCommit, if set, runs after every result was decided and published, before the
	// transaction commits: the place to make the published archives durable. An error rolls
	// the claim back.
	BeforeCommit func() error
	// Writing, if set, is called once a try's decisions are made and BeforeCommit has run,
	// just before its writes and COMMIT are sent (and may be called again by a later try):
	// from then on the claim only waits for its commit, and another claim may begin its reads
	// beside it (the dispatch claimers' relay). reads is how long the try's first round trip
	// took, from its reads being queued to their answers read: mostly the link's round trip.
	Writing func(reads time.Duration)
	// Stocked, if set, reports whether this replica holds the task reserved and has not handed
	// it out: a reply for it comes from no worker it was given to, and is dropped as unknown.
	// A reply for any other reserved task is accepted (a hand-out whose attribution has not
	// committed, or never will: its replica died), its attempt recorded at the claim.
	Stocked func(taskID int64) bool
}

// hookError is a BeforeCommit failure, which rolls the claim back.
type hookError struct{ err error }

func (e *hookError) Error() string { return e.err.Error() }
func (e *hookError) Unwrap() error { return e.err }

// RolledBack reports whether a claim that failed with err certainly did not commit: PostgreSQL
// reported an error that aborts the transaction and leaves the session alive, or a hook failed
// before the COMMIT was sent. A connection lost while the writes and COMMIT were under way is
// not certain: the server may have committed. Nor is a FATAL error (the session ending, as
// in a fast shutdown: 57P01): a server told to stop while it commits may write the commit
// record and then end the session with FATAL before it answers the COMMIT.
func RolledBack(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch cmp.Or(pgErr.SeverityUnlocalized, pgErr.Severity) {
		case "FATAL", "PANIC":
			return false
		}
		return true
	}
	var hook *hookError
	return errors.As(err, &hook) || errors.Is(err, pgx.ErrTxCommitRollback)
}

// ClaimWithHooks decides a batch of replies in one transaction, as the reference dispatcher's
// claim_result, defer_retryable and note_unusable_reply did for one: accept a result unless one
// that must stand already landed, drop a stale or unknown one, defer a retryable cause, note an
// unusable reply. hooks.Publish, if set, is called for each accepted result and stand-in before
// the commit. Decisions come back in the order of results.
//
// It goes in four steps: each result is made whole (its messages' kinds resolved, the new ones
// added to message_kinds, before the transaction: resultKinds); then, in one transaction of two
// round trips (pipelinedTx), the results' tasks and rows are read locked (lockTasks), each
// result is decided against them (claim.decide, the rules in decide.go), and the writes and
// COMMIT go together (writes.flush).
func (s *Store) ClaimWithHooks(ctx context.Context, results []Result, hooks ClaimHooks) ([]Decision, error) {
	if len(results) == 0 {
		return nil, nil
	}
	began := time.Now()
	refs := map[kindKey]kindRef{}
	if err := s.resultKinds(ctx, results, refs); err != nil {
		return nil, err
	}
	c := &claim{s: s, results: results, hooks: hooks, refs: refs, began: began}
	ids := resultTasks(results)
	read := func(ctx context.Context, q *dbsqlc.Queries) (lockedTasks, error) { return lockTasks(ctx, q, ids) }
	if err := pipelinedTx(ctx, s, "claim", txMode{generic: true, reads: &c.reads}, read, c.decide); err != nil {
		return nil, err
	}
	s.countClaimed(results, c.decisions, c.now)
	return c.decisions, nil
}

// claim is one claim transaction: the results it decides, made whole, and what it decided.
type claim struct {
	s       *Store
	results []Result
	hooks   ClaimHooks
	refs    map[kindKey]kindRef // the rows of the results' message kinds (resultKinds)
	began   time.Time           // when the claim began (the claim stage's start)

	// What the try that committed decided (a retried transaction decides again), and how
	// long its reads took (ClaimHooks.Writing).
	now       time.Time
	decisions []Decision
	reads     time.Duration
}

// decide decides every result against the rows read, and returns the transaction's writes.
func (c *claim) decide(now time.Time, got lockedTasks, _ *dbsqlc.Queries) (*writes, error) {
	byTask := got.byTask()
	w := newWrites()
	// A copy: what the transaction adds to it is not committed, and a retry starts over.
	w.kindRefs = maps.Clone(c.refs)
	c.now, c.decisions = now, make([]Decision, len(c.results))
	step := &claimStep{now: now, w: w, hooks: c.hooks}
	for i := range c.results {
		c.s.decideResult(step, byTask[c.results[i].TaskID], &c.results[i], &c.decisions[i])
	}
	if c.hooks.BeforeCommit != nil {
		if err := c.hooks.BeforeCommit(); err != nil {
			return nil, &hookError{fmt.Errorf("before commit: %w", err)}
		}
	}
	if c.hooks.Writing != nil {
		c.hooks.Writing(c.reads)
	}
	// The claim stage ends at the commit, which comes one round trip after the writes are sent:
	// that round trip is taken as long as this store's last claim's (docs/stages.md).
	w.claimBegan, w.claimSent, w.commitTook = c.began, time.Now(), time.Duration(c.s.lastCommit.Load())
	return w, nil
}

// resultTasks lists the tasks of results, sorted, each once.
func resultTasks(results []Result) []int64 {
	ids := make([]int64, 0, len(results))
	for _, r := range results {
		if r.TaskID > 0 {
			ids = append(ids, r.TaskID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// countClaimed adds a committed claim's results to the worker counters (FlushWorkers writes
// them): the results of each worker, and the hand-outs the claim attributed, per service.
func (s *Store) countClaimed(results []Result, decisions []Decision, at time.Time) {
	counted := map[workerKey]int64{}
	dispatched := map[int32]map[string]int64{} // hand-outs this claim attributed, per service
	for i := range results {
		if decisions[i].Outcome == OutcomeUnknown || decisions[i].Outcome == OutcomeWrongService || decisions[i].Outcome == OutcomeNotHolder {
			continue
		}
		counted[workerKey{results[i].Worker, decisions[i].ServiceID}]++
		if decisions[i].AttributedAtClaim {
			if dispatched[decisions[i].ServiceID] == nil {
				dispatched[decisions[i].ServiceID] = map[string]int64{}
			}
			dispatched[decisions[i].ServiceID][results[i].Worker]++
		}
	}
	s.tally.committed(0, nil, counted, at)
	for svc, m := range dispatched {
		s.tally.committed(svc, m, nil, at)
	}
}
