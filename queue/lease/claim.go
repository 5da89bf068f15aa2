package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// PublishFunc publishes an accepted result's archive (renames it into place) while its claim's
// transaction is open, for the tests' claims (leasetest.Claim): an error drops that one result
// (Claim.Commit's unpublished), the task stays exactly as it was, and the result it would have
// replaced stands.
type PublishFunc func(d *Decision) error

// claimTask is a task a claim decides results for, with its dispatch rows, all locked.
type claimTask struct {
	task dbsqlc.TaskLockForClaimRow
	rows []*dbsqlc.Dispatch
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

// RolledBack reports whether a claim that failed with err certainly did not commit: PostgreSQL
// reported an error that aborts the transaction and leaves the session alive, or the COMMIT
// was answered with a rollback. A connection lost while the writes and COMMIT were under way is
// not certain: the server may have committed. Nor is a FATAL error (the session ending, as
// in a fast shutdown: 57P01): a server told to stop while it commits may write the commit
// record and then end the session with FATAL before it answers the COMMIT. A caller that ends
// a claim itself before its Commit (Claim.Rollback) knows it did not commit.
func RolledBack(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch cmp.Or(pgErr.SeverityUnlocalized, pgErr.Severity) {
		case "FATAL", "PANIC":
			return false
		}
		return true
	}
	return errors.Is(err, pgx.ErrTxCommitRollback)
}

// errTaskTwice refuses a claim given two results of one task: the second's decision would
// depend on whether the first's archive is published, which is known only after the decisions.
// The caller claims the later one in a claim of its own (the dispatch claimers hold it for
// their next batch).
var errTaskTwice = errors.New("two results of one task in one claim")

// Claim is one claim transaction under way, taken in steps with values passed (the caller's
// steps between them are work on local files only, never a round trip to a worker):
//
//  1. [Store.BeginClaim] makes each result whole (its messages' kinds resolved: resultKinds),
//     then sends round trip 1 (BEGIN, the clock, the results' tasks and rows read locked:
//     lockTasks) and decides every result against them (the rules in decide.go);
//  2. the caller publishes the archive of each decision of [Claim.ToPublish] (renames it into
//     place); then it may make the archives durable, and hand on to the next claim (by
//     [Claim.Reads], how long round trip 1 took);
//  3. [Claim.Commit], given the publishes that failed, drops those results (the earlier state
//     stands) and sends the writes of the decisions that stand (writes.flush: one Apply
//     statement) with COMMIT (round trip 2).
//
// Every path ends the transaction: Commit, or [Claim.Rollback], which a caller defers (it does
// nothing after the Commit). A failed step leaves the transaction ended; the caller puts back
// what it published when RolledBack says so, and tries again from BeginClaim.
type Claim struct {
	s       *Store
	tx      *pipelined
	results []Result
	began   time.Time // when the claim began (the claim stage's start)
	step    *claimStep
	// decisions are in the order of results; ctx is BeginClaim's, for the rollback.
	decisions []Decision
	ctx       context.Context
	// ToPublish are the decisions whose archives the caller publishes, in the order of the
	// results: each accepted result and stand-in.
	ToPublish []*Decision
	// Reads is how long the claim's first round trip took, from its reads being sent to their
	// answers read: mostly the link's round trip (the dispatch claimers' relay hands on by it).
	Reads time.Duration
}

// BeginClaim begins a claim of a batch of replies, as the reference dispatcher's claim_result,
// defer_retryable and note_unusable_reply did for one: accept a result unless one that must
// stand already landed, drop a stale or unknown one, defer a retryable cause, note an unusable
// reply. Results must be of distinct tasks. stocked, if not nil, reports whether this replica
// holds a task reserved and has not handed it out: a reply for it comes from no worker it was
// given to, and is dropped as unknown; a reply for any other reserved task is accepted (a
// hand-out whose attribution has not committed, or never will: its replica died), its attempt
// recorded at the claim. The decisions are made when it returns; see Claim for the next steps.
func (s *Store) BeginClaim(ctx context.Context, results []Result, stocked func(taskID int64) bool) (*Claim, error) {
	c := &Claim{s: s, results: results, began: time.Now(), ctx: ctx}
	if len(results) == 0 {
		return c, nil
	}
	ids := resultTasks(results)
	if n := countTasks(results); n != len(ids) {
		return nil, fmt.Errorf("claim: %w (%d results of %d tasks)", errTaskTwice, n, len(ids))
	}
	refs := map[kindKey]kindRef{}
	if err := s.resultKinds(ctx, results, refs); err != nil {
		return nil, err
	}
	tx, got, err := beginPipelined(ctx, s, txMode{generic: true}, lockTasks(ids))
	if err != nil {
		return nil, translate("claim", err)
	}
	c.tx, c.Reads = tx, tx.reads
	byTask := got.byTask()
	w := newWrites()
	w.kindRefs = refs // the transaction's own: what it adds to them is not committed
	c.step = &claimStep{now: tx.now, w: w, stocked: stocked}
	c.decisions = make([]Decision, len(results))
	for i := range results {
		s.decideResult(c.step, byTask[results[i].TaskID], &results[i], &c.decisions[i])
	}
	for i := range c.step.recorded {
		c.ToPublish = append(c.ToPublish, c.step.recorded[i].d)
	}
	return c, nil
}

// countTasks counts the results of known tasks (resultTasks lists them, each once).
func countTasks(results []Result) int {
	n := 0
	for _, r := range results {
		if r.TaskID > 0 {
			n++
		}
	}
	return n
}

// Commit writes the decisions that stand and commits, in one round trip (after one more, only
// for message kinds this replica has not seen committed), and returns the decisions in the
// order of the results. unpublished are the decisions of ToPublish whose publish failed, with
// its error: each such result is dropped (OutcomePublishFail) and its task stays exactly as it
// was; the result it would have replaced stands. It ends the transaction, committed or not.
func (c *Claim) Commit(ctx context.Context, unpublished map[*Decision]error) ([]Decision, error) {
	if len(c.results) == 0 {
		return nil, nil
	}
	if c.tx == nil || c.tx.conn == nil {
		return nil, translate("claim", errTxEnded)
	}
	w := c.step.w
	for i := range c.step.recorded {
		rec := &c.step.recorded[i]
		if err := unpublished[rec.d]; err != nil {
			d := rec.d
			d.Outcome, d.Reason, d.Status = OutcomePublishFail, err.Error(), queue.Status(rec.ct.task.Status)
			c.s.logger.Warn("result not published; the earlier state stands",
				"task_id", d.TaskID, "worker", d.Result.Worker, "error", err)
			continue
		}
		c.s.record(c.step, rec)
	}
	// The claim stage ends at the commit, which comes one round trip after the writes are sent:
	// that round trip is taken as long as this store's last claim's (docs/stages.md).
	w.claimBegan, w.claimSent, w.commitTook = c.began, time.Now(), time.Duration(c.s.lastCommit.Load())
	if err := c.tx.commit(ctx, w); err != nil {
		return nil, translate("claim", err)
	}
	c.s.lastCommit.Store(int64(c.tx.commitTook))
	c.s.countClaimed(c.results, c.decisions, c.step.now)
	return c.decisions, nil
}

// Rollback ends the claim's transaction without writing, if Commit has not ended it.
func (c *Claim) Rollback() {
	if c.tx != nil {
		c.tx.rollback(c.ctx)
	}
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
