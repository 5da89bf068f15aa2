package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// retry budget decides what happens (Defer).
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
}

// Outcome is what became of a Result.
type Outcome string

// The outcomes of a Result.
const (
	OutcomeAccepted     Outcome = "accepted"      // recorded: it is the task's result
	OutcomeSuperseded   Outcome = "superseded"    // a result that must stand already landed
	OutcomeStale        Outcome = "stale"         // it belongs to an earlier run
	OutcomeUnknown      Outcome = "unknown"       // no such task in flight or held
	OutcomeWrongService Outcome = "wrong_service" // the task belongs to another service
	OutcomeDeferred     Outcome = "deferred"      // a retryable cause: the next reap requeues it
	OutcomeFinal        Outcome = "final"         // a retryable cause on the last attempt: its stand-in Fatal
	OutcomeDropped      Outcome = "dropped"       // a retryable cause with nothing to retry
	OutcomeUnusable     Outcome = "unusable"      // noted; the reaper moves the task on
	OutcomePublishFail  Outcome = "publish_failed"
)

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

// Publishes reports whether the caller must publish the result's archive before the claim
// commits.
func (d *Decision) Publishes() bool {
	return d.Outcome == OutcomeAccepted || d.Outcome == OutcomeFinal
}

// PublishFunc publishes an accepted result's archive (renames it into place) inside the claim's
// transaction. An error drops that one result: the task stays exactly as it was, and the result
// it would have replaced stands.
type PublishFunc func(d *Decision) error

type claimTask struct {
	task dbsqlc.Task
	rows []*dbsqlc.Dispatch
}

// Claim decides a batch of replies in one transaction, as the reference dispatcher's
// claim_result, defer_retryable and note_unusable_reply did for one: accept a result unless one
// that must stand already landed, drop a stale or unknown one, defer a retryable cause, note an
// unusable reply. publish, if not nil, is called for each accepted result and stand-in before
// the commit. Decisions come back in the order of results.
func (s *Store) Claim(ctx context.Context, results []Result, publish PublishFunc) ([]Decision, error) {
	return s.ClaimWithHooks(ctx, results, ClaimHooks{Publish: publish})
}

// ClaimHooks are the caller's steps inside a claim transaction.
type ClaimHooks struct {
	// Publish is called for each accepted result and stand-in (see PublishFunc).
	Publish PublishFunc
	// BeforeCommit, if set, runs after every result was decided and published, before the
	// transaction commits: the place to make the published archives durable. An error rolls
	// the claim back.
	BeforeCommit func() error
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

// ClaimWithHooks is Claim with a BeforeCommit step.
func (s *Store) ClaimWithHooks(ctx context.Context, results []Result, hooks ClaimHooks) ([]Decision, error) {
	publish := hooks.Publish
	if len(results) == 0 {
		return nil, nil
	}
	ids := make([]int64, 0, len(results))
	for _, r := range results {
		if r.TaskID > 0 {
			ids = append(ids, r.TaskID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	decisions := make([]Decision, len(results))
	var at time.Time
	var tasks []dbsqlc.Task
	var rows []dbsqlc.Dispatch
	reads := func(q *dbsqlc.Queries) (err error) {
		if tasks, err = q.TaskLockForClaim(ctx, ids); err != nil {
			return fmt.Errorf("lock tasks: %w", err)
		}
		if rows, err = q.DispatchLockForTasks(ctx, ids); err != nil {
			return fmt.Errorf("lock dispatch rows: %w", err)
		}
		return nil
	}
	err := s.pipelinedTx(ctx, "claim", txMode{generic: true}, reads, func(now time.Time, _ *dbsqlc.Queries) (*writes, error) {
		byTask := make(map[int64]*claimTask, len(tasks))
		for _, t := range tasks {
			byTask[t.ID] = &claimTask{task: t}
		}
		for i := range rows {
			if ct := byTask[rows[i].TaskID]; ct != nil {
				ct.rows = append(ct.rows, &rows[i])
			}
		}
		w := newWrites()
		at = now
		for i := range results {
			r := &results[i]
			d := &decisions[i]
			*d = Decision{Result: r, TaskID: r.TaskID, Attempt: -1}
			ct := byTask[r.TaskID]
			if ct == nil {
				d.Outcome, d.Reason = OutcomeUnknown, "no such task"
				continue
			}
			d.Run, d.ServiceID, d.CorpusID, d.Entry = ct.task.Run, ct.task.ServiceID, ct.task.CorpusID, ct.task.Entry
			d.Status = queue.Status(ct.task.Status)
			if r.ServiceID != 0 && r.ServiceID != ct.task.ServiceID {
				d.Outcome, d.Reason = OutcomeWrongService, "the task belongs to another service"
				continue
			}
			s.decide(ct, r, d, now, w, publish, hooks.Stocked)
		}
		// Each decided reply ends its task's receipt (Receive), whatever was decided.
		for _, ct := range byTask {
			for _, row := range ct.rows {
				if row.State == StateInFlight && row.ReceivedAt != nil {
					row.ReceivedAt = nil
					w.put(row)
				}
			}
		}
		if hooks.BeforeCommit != nil {
			if err := hooks.BeforeCommit(); err != nil {
				return nil, &hookError{fmt.Errorf("before commit: %w", err)}
			}
		}
		return w, nil
	})
	if err != nil {
		return nil, err
	}
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
	return decisions, nil
}

// decide settles one result against its task's locked rows, updating them in place when the
// decision stands (and publish succeeded).
func (s *Store) decide(ct *claimTask, r *Result, d *Decision, now time.Time, w *writes, publish PublishFunc, stocked func(int64) bool) {
	if i := slices.IndexFunc(ct.rows, func(x *dbsqlc.Dispatch) bool { return x.State == StateReserved }); i >= 0 {
		if !s.claimReserved(ct.rows[i], ct.task.Run, r, d, now, w, stocked) {
			return
		}
	}
	row, attempt := locateResult(ct.rows, ct.task.Run, r)
	if row == nil {
		d.Outcome, d.Reason = OutcomeUnknown, "the task is not in flight or held"
		if r.Kind == KindRetryable {
			d.Outcome = OutcomeDropped
		}
		if r.Key != "" && len(ct.rows) > 0 {
			d.Outcome, d.Reason = OutcomeNotHolder, "key "+r.Key+" held no attempt of the task"
		}
		return
	}
	d.Run, d.Attempt, d.Attempts = row.Run, attempt, len(row.AttemptWorkers)
	if row.Run < ct.task.Run {
		d.Outcome, d.Reason = OutcomeStale, "an earlier run's reply"
		if r.Kind == KindRetryable {
			d.Outcome = OutcomeDropped
		}
		w.outcome(row.TaskID, row.Run, attempt, "stale", 0)
		return
	}
	if expiredHold(row, now) || (row.State == StateSettling && s.lateWindow() == 0) {
		d.Outcome, d.Reason = OutcomeUnknown, "the late-result window has passed"
		if r.Kind == KindRetryable {
			d.Outcome = OutcomeDropped
		}
		return
	}
	next := cloneRow(row)
	var msgs []queue.Message
	status := queue.Status(ct.task.Status)
	drop := false // the new row state is a delete
	switch r.Kind {
	case KindUnusable:
		d.Outcome = OutcomeUnusable
		w.outcome(row.TaskID, row.Run, attempt, "unusable", 0)
		if row.State == StateInFlight && attempt == currentAttempt(row) && !row.Answered {
			next.Answered = true
			next.ReceivedAt = nil
			*row = *next
			w.put(row)
		}
		return
	case KindRetryable:
		if !s.decideRetryable(row, next, attempt, r, d, now, &drop) {
			w.outcome(row.TaskID, row.Run, attempt, "retryable", 0)
			return
		}
		if d.Outcome == OutcomeDeferred {
			*row = *next
			w.put(row)
			w.outcome(row.TaskID, row.Run, attempt, "retryable", 0)
			return
		}
		// A stand-in Fatal: recorded like a result.
		status, msgs = queue.StatusFatal, r.Messages
	case KindReport:
		if !s.decideReport(row, next, attempt, r, d, now, &drop) {
			w.outcome(row.TaskID, row.Run, attempt, string(d.Outcome), r.Status)
			return
		}
		status, msgs = r.Status, r.Messages
	}
	d.Status = status
	if publish != nil {
		if err := publish(d); err != nil {
			d.Outcome, d.Reason, d.Status = OutcomePublishFail, err.Error(), queue.Status(ct.task.Status)
			s.logger.Warn("result not published; the earlier state stands",
				"task_id", r.TaskID, "worker", r.Worker, "error", err)
			return
		}
	}
	if drop {
		w.del(row)
		ct.rows = slices.DeleteFunc(ct.rows, func(x *dbsqlc.Dispatch) bool { return x == row })
	} else {
		*row = *next
		w.put(row)
	}
	ct.task.Status = int16(status)
	w.setTask(row.TaskID, status, ct.task.Run)
	w.messages[rowKey{row.TaskID, row.Run}] = msgs
	if d.Replaced != nil && d.Replaced.Attempt != attempt {
		w.outcome(row.TaskID, row.Run, d.Replaced.Attempt, "replaced", 0)
	}
	outcome := "accepted"
	if d.Outcome == OutcomeFinal {
		outcome = "retryable"
	}
	w.outcome(row.TaskID, row.Run, attempt, outcome, status)
}

// claimReserved readies a reserved row for the decision on a reply, and reports whether to go
// on deciding. A reply from a worker of an earlier attempt is decided as if the row were still
// the queued retry it was reserved from (a result after requeue). Any other reply is the
// hand-out's: unless the task is still in this replica's stock, its attempt is recorded now, to
// the worker the reply names (under CURVE, a worker of its key), and the row goes in flight, as
// its attribution would have made it.
func (s *Store) claimReserved(row *dbsqlc.Dispatch, taskRun int32, r *Result, d *Decision, now time.Time, w *writes, stocked func(int64) bool) bool {
	if row.Run < taskRun {
		return true // an earlier run's: decided as stale
	}
	if heldEarlier(row, r) {
		row.State, row.Queued = StateSettling, true
		row.ForgetAt = ptrTime(now.Add(s.lateWindow()))
		return true
	}
	if stocked != nil && stocked(row.TaskID) {
		d.Outcome, d.Reason = OutcomeUnknown, "the task is reserved by this replica and was not handed out"
		if r.Kind == KindRetryable {
			d.Outcome = OutcomeDropped
		}
		return false
	}
	leasedAt := now
	if !r.HandedOut.IsZero() {
		// The hand-out's time by the database clock: now less its age by the replica's
		// monotonic clock, never before the reservation.
		leasedAt = maxTime(row.LeasedAt, now.Add(-time.Since(r.HandedOut)))
	}
	row.AttemptWorkers = append(row.AttemptWorkers, r.Worker)
	row.State, row.LeasedAt = StateInFlight, leasedAt
	row.Deadline = leaseDeadline(row, leasedAt)
	w.put(row)
	w.attempts = append(w.attempts, newAttempt{TaskID: row.TaskID, Run: row.Run, Attempt: int32(currentAttempt(row)),
		Worker: r.Worker, Replica: row.Replica, LeasedAt: leasedAt})
	d.AttributedAtClaim = true
	return true
}

// heldEarlier reports whether r comes from the worker (under CURVE, the key) of an earlier
// attempt of row.
func heldEarlier(row *dbsqlc.Dispatch, r *Result) bool {
	if r.Key == "" {
		return slices.Contains(row.AttemptWorkers, r.Worker)
	}
	prefix := keyPrefix(r.Key)
	return slices.ContainsFunc(row.AttemptWorkers, func(w string) bool { return strings.HasPrefix(w, prefix) })
}

// hold puts next out of flight, held for late results with f as the result that stands.
func (s *Store) hold(next *dbsqlc.Dispatch, f *Finished, now time.Time) {
	next.State, next.Queued, next.Answered, next.ReceivedAt = StateSettling, false, false, nil
	setFinished(next, f)
	next.ForgetAt = ptrTime(now.Add(s.lateWindow()))
}

// decideReport is claim_result: it reports whether the result is accepted, filling d and next.
func (s *Store) decideReport(row, next *dbsqlc.Dispatch, attempt int, r *Result, d *Decision, now time.Time, drop *bool) bool {
	failure := r.Status.Failure()
	if row.State == StateInFlight {
		attempts := len(row.AttemptWorkers)
		older := attempt+1 < attempts
		d.Outcome = OutcomeAccepted
		if older {
			d.Late = LateOlderAttempt
		}
		// Held when a later result may still replace it: a newer attempt runs, or this is a
		// failure that any usable result replaces. A single-attempt failure is not held.
		if (older || (failure && attempts > 1)) && s.lateWindow() > 0 {
			s.hold(next, &Finished{attempt, r.Status}, now)
			next.DeadLettered = false
		} else {
			*drop = true
		}
		return true
	}
	// Settling: a usable result replaces a failure and a failure never replaces a usable result;
	// between results of one kind, the newer attempt wins.
	if f := finishedOf(row); f != nil {
		var replaces bool
		switch {
		case f.Status.Failure() && !failure:
			replaces = true
		case !f.Status.Failure() && failure:
			replaces = false
		default:
			replaces = attempt > f.Attempt
		}
		if !replaces {
			d.Outcome, d.Reason = OutcomeSuperseded, fmt.Sprintf("attempt %d's result stands", f.Attempt)
			return false
		}
		d.Late = LateReplacesFailure
		if attempt > f.Attempt {
			d.Late = LateNewerAttempt
		}
		d.Replaced = f
	} else if row.DeadLettered {
		d.Late = LateAfterDeadLetter
	} else {
		d.Late = LateAfterRequeue
	}
	d.Outcome = OutcomeAccepted
	s.hold(next, &Finished{attempt, r.Status}, now)
	return true
}

// decideRetryable is defer_retryable: it reports whether the cause changes the row (Deferred or
// Final), filling d and next.
func (s *Store) decideRetryable(row, next *dbsqlc.Dispatch, attempt int, r *Result, d *Decision, now time.Time, drop *bool) bool {
	if row.State == StateInFlight {
		if attempt != currentAttempt(row) {
			d.Outcome, d.Reason = OutcomeDropped, "an older attempt's cause; a newer attempt is running"
			return false
		}
		if exhausted(row) {
			// The last attempt: the cause is the task's stand-in Fatal, held for a usable late result.
			d.Outcome = OutcomeFinal
			if s.lateWindow() > 0 {
				s.hold(next, &Finished{attempt, queue.StatusFatal}, now)
				next.DeadLettered = true
			} else {
				*drop = true
			}
			return true
		}
		next.LastCause = encodeCause(r.Messages)
		next.Deadline = now // due at the next reap
		next.Answered = true
		next.ReceivedAt = nil
		d.Outcome = OutcomeDeferred
		return true
	}
	switch {
	case finishedOf(row) != nil:
		d.Outcome, d.Reason = OutcomeDropped, "a result for the task already landed"
	case row.DeadLettered:
		d.Outcome, d.Reason = OutcomeDropped, "the task was already dead-lettered"
	case attempt != currentAttempt(row):
		d.Outcome, d.Reason = OutcomeDropped, "an older attempt's cause; the newest attempt's stands"
	default:
		next.LastCause = encodeCause(r.Messages)
		d.Outcome = OutcomeDeferred
		return true
	}
	return false
}
