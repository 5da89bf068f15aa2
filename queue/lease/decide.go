// The claim rules: how a reply is decided against its task's dispatch rows (the reference
// dispatcher's claim_result and defer_retryable), and the vocabulary of the decisions.

package lease

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Late says why an accepted result came after its lease expired.
type Late string

// The kinds of late result.
const (
	// LateNone: the result of the attempt in flight.
	LateNone Late = ""
	// LateOlderAttempt: an older attempt's result while a newer attempt is in flight; the newer
	// one may still report and replace it.
	LateOlderAttempt Late = "older_attempt"
	// LateAfterRequeue: the reaper had queued a retry; the retry is not leased now.
	LateAfterRequeue Late = "after_requeue"
	// LateAfterDeadLetter: the reaper had dead-lettered the task; this replaces its stand-in.
	LateAfterDeadLetter Late = "after_dead_letter"
	// LateNewerAttempt: a newer attempt than the one accepted earlier; it replaces it.
	LateNewerAttempt Late = "newer_attempt"
	// LateReplacesFailure: a usable result of an older attempt replacing a newer attempt's
	// accepted failure ("good result wins").
	LateReplacesFailure Late = "replaces_failure"
)

// Finished is an accepted result: its attempt and status.
type Finished struct {
	Attempt int
	Status  queue.Status
}

// attemptOf is the attempt a reply from worker belongs to: the newest attempt dispatched to it,
// or the newest of all when worker is not on record (so it can never overwrite a newer result).
func attemptOf(workers []string, worker string) int {
	for i := len(workers) - 1; i >= 0; i-- {
		if workers[i] == worker {
			return i
		}
	}
	return len(workers) - 1
}

func currentAttempt(d *dbsqlc.Dispatch) int { return len(d.AttemptWorkers) - 1 }

// exhausted reports whether an expired lease has spent its retry budget.
func exhausted(d *dbsqlc.Dispatch) bool { return d.Retries > queue.MaxDispatchRetries }

func finishedOf(d *dbsqlc.Dispatch) *Finished {
	if d.FinishedAttempt == nil || d.FinishedStatus == nil {
		return nil
	}
	return &Finished{Attempt: int(*d.FinishedAttempt), Status: queue.Status(*d.FinishedStatus)}
}

func setFinished(d *dbsqlc.Dispatch, f *Finished) {
	if f == nil {
		d.FinishedAttempt, d.FinishedStatus = nil, nil
		return
	}
	a, st := int32(f.Attempt), int16(f.Status)
	d.FinishedAttempt, d.FinishedStatus = &a, &st
}

// expiredHold reports whether a settling row's late-result window has passed: it no longer takes
// results. A queued retry is never past it before it is leased.
func expiredHold(d *dbsqlc.Dispatch, now time.Time) bool {
	return d.State == StateSettling && !d.Queued && d.ForgetAt != nil && !d.ForgetAt.After(now)
}

// locate finds the row and attempt a reply from worker belongs to, among a task's kept rows:
// the newest run in which worker holds an attempt, else the task's current run (or its newest
// row), attributed to that row's newest attempt.
func locate(rows []*dbsqlc.Dispatch, taskRun int32, worker string) (*dbsqlc.Dispatch, int) {
	var newest, current *dbsqlc.Dispatch
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		if newest == nil || r.Run > newest.Run {
			newest = r
		}
		if r.Run == taskRun {
			current = r
		}
	}
	best := -1
	var found *dbsqlc.Dispatch
	for _, r := range rows {
		if slices.Contains(r.AttemptWorkers, worker) && (found == nil || r.Run > found.Run) {
			found = r
		}
	}
	if found != nil {
		best = attemptOf(found.AttemptWorkers, worker)
		return found, best
	}
	if current == nil {
		current = newest
	}
	if current == nil {
		return nil, -1
	}
	return current, currentAttempt(current)
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
	// OutcomeNotHolder: the reply came with an authenticated key (Result.Key) holding no
	// attempt of the task; under CURVE only a key the task was leased to may answer it.
	OutcomeNotHolder Outcome = "not_holder"
)

// AttemptOutcome is what became of an attempt, as attempts.outcome records it.
type AttemptOutcome string

// The attempt outcomes.
const (
	AttemptAccepted     AttemptOutcome = "accepted"      // its result is (or was) the task's
	AttemptRetryable    AttemptOutcome = "retryable"     // it answered with a retryable cause
	AttemptUnusable     AttemptOutcome = "unusable"      // it answered with nothing usable
	AttemptStale        AttemptOutcome = "stale"         // its result came after a rerun
	AttemptSuperseded   AttemptOutcome = "superseded"    // its result came after one that stands
	AttemptReplaced     AttemptOutcome = "replaced"      // its result was replaced by a later one
	AttemptExpired      AttemptOutcome = "expired"       // its lease ran out unanswered
	AttemptDeadLettered AttemptOutcome = "dead_lettered" // the last attempt, expired
)

// claimStep is what every decision of one claim transaction shares: its clock, its writes, the
// caller's stock (BeginClaim's stocked), and the decisions to record once published.
type claimStep struct {
	now     time.Time
	w       *writes
	stocked func(taskID int64) bool
	// recorded are the accepted results and stand-ins, in the order decided: written at the
	// commit (Store.record) unless their publish failed (Claim.Commit's unpublished).
	recorded []recorded
}

// recorded is a decision whose writes wait for its archive's publish: the task, the reply, the
// decision and what decideOnRows settled on.
type recorded struct {
	ct *claimTask
	r  *Result
	d  *Decision
	x  decided
}

// refuse sets the outcome of a reply its task does not take: o, for reason; a retryable cause
// is Dropped instead, as there is nothing to retry.
func (d *Decision) refuse(r *Result, o Outcome, reason string) {
	d.Outcome, d.Reason = o, reason
	if r.Kind == KindRetryable {
		d.Outcome = OutcomeDropped
	}
}

// decideResult decides one result against its task (ct, nil when there is no such task) and
// the task's locked rows, and fills d. An accepted result or stand-in is written once its
// archive is published (claimStep.recorded); any other decision's writes are made at once.
func (s *Store) decideResult(step *claimStep, ct *claimTask, r *Result, d *Decision) {
	*d = Decision{Result: r, TaskID: r.TaskID, Attempt: -1}
	if ct == nil {
		d.Outcome, d.Reason = OutcomeUnknown, "no such task"
		return
	}
	d.Run, d.ServiceID, d.CorpusID, d.Entry = ct.task.Run, ct.task.ServiceID, ct.task.CorpusID, ct.task.Entry
	d.Status = queue.Status(ct.task.Status)
	if r.ServiceID != 0 && r.ServiceID != ct.task.ServiceID {
		d.Outcome, d.Reason = OutcomeWrongService, "the task belongs to another service"
		return
	}
	s.decideOnRows(step, ct, r, d)
}

// decideOnRows decides a result of a known task of its service against the task's rows.
func (s *Store) decideOnRows(step *claimStep, ct *claimTask, r *Result, d *Decision) {
	now, w := step.now, step.w
	if i := slices.IndexFunc(ct.rows, func(x *dbsqlc.Dispatch) bool { return x.State == StateReserved }); i >= 0 {
		if !s.claimReserved(step, ct.rows[i], ct.task.Run, r, d) {
			return
		}
	}
	row, attempt := locateResult(ct.rows, ct.task.Run, r)
	if row == nil {
		d.refuse(r, OutcomeUnknown, "the task is not in flight or held")
		if r.Key != "" && len(ct.rows) > 0 {
			d.Outcome, d.Reason = OutcomeNotHolder, "key "+r.Key+" held no attempt of the task"
		}
		return
	}
	d.Run, d.Attempt, d.Attempts = row.Run, attempt, len(row.AttemptWorkers)
	if row.Run < ct.task.Run {
		d.refuse(r, OutcomeStale, "an earlier run's reply")
		w.outcome(row.TaskID, row.Run, attempt, AttemptStale, 0)
		return
	}
	if expiredHold(row, now) || (row.State == StateSettling && s.lateWindow() == 0) {
		d.refuse(r, OutcomeUnknown, "the late-result window has passed")
		return
	}
	next := cloneRow(row)
	status := queue.Status(ct.task.Status)
	var drop bool // the new row state is a delete
	switch r.Kind {
	case KindUnusable:
		d.Outcome = OutcomeUnusable
		w.outcome(row.TaskID, row.Run, attempt, AttemptUnusable, 0)
		if row.State == StateInFlight && attempt == currentAttempt(row) && !row.Answered {
			next.Answered = true
			next.ReceivedAt = nil
			*row = *next
			w.put(row)
		}
		return
	case KindRetryable:
		var changes bool
		if changes, drop = s.decideRetryable(row, next, attempt, r, d, now); !changes {
			w.outcome(row.TaskID, row.Run, attempt, AttemptRetryable, 0)
			return
		}
		if d.Outcome == OutcomeDeferred {
			*row = *next
			w.put(row)
			w.outcome(row.TaskID, row.Run, attempt, AttemptRetryable, 0)
			return
		}
		// A stand-in Fatal: recorded like a result, its cause the task's messages.
		status = queue.StatusFatal
	case KindReport:
		var accepted bool
		if accepted, drop = s.decideReport(row, next, attempt, r, d, now); !accepted {
			w.outcome(row.TaskID, row.Run, attempt, AttemptSuperseded, r.Status)
			return
		}
		status = r.Status
	}
	d.Status = status
	step.recorded = append(step.recorded, recorded{ct: ct, r: r, d: d,
		x: decided{row: row, next: next, attempt: attempt, status: status, drop: drop}})
}

// decided is what decideOnRows settled on for a reply: the row and its next state (drop:
// deleted), the attempt and the task's status; the task's messages are the reply's.
type decided struct {
	row, next *dbsqlc.Dispatch
	attempt   int
	status    queue.Status
	drop      bool
}

// claimReserved readies a reserved row for the decision on a reply, and reports whether to go
// on deciding. A reply from a worker of an earlier attempt is decided as if the row were still
// the queued retry it was reserved from (a result after requeue). Any other reply is the
// hand-out's: unless the task is still in this replica's stock, its attempt is recorded now, to
// the worker the reply names (under CURVE, a worker of its key), and the row goes in flight, as
// its attribution would have made it.
func (s *Store) claimReserved(step *claimStep, row *dbsqlc.Dispatch, taskRun int32, r *Result, d *Decision) bool {
	now, w, stocked := step.now, step.w, step.stocked
	if row.Run < taskRun {
		return true // an earlier run's: decided as stale
	}
	if heldEarlier(row, r) {
		row.State, row.Queued = StateSettling, true
		row.ForgetAt = ptrTime(now.Add(s.lateWindow()))
		return true
	}
	if stocked != nil && stocked(row.TaskID) {
		d.refuse(r, OutcomeUnknown, "the task is reserved by this replica and was not handed out")
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

// decideReport is claim_result: it reports whether the result is accepted, filling d and next,
// and whether the row goes (drop) rather than becoming next.
func (s *Store) decideReport(row, next *dbsqlc.Dispatch, attempt int, r *Result, d *Decision, now time.Time) (accepted, drop bool) {
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
			return true, false
		}
		return true, true
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
			return false, false
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
	return true, false
}

// decideRetryable is defer_retryable: it reports whether the cause changes the row (Deferred or
// Final), filling d and next, and whether the row goes (drop) rather than becoming next.
func (s *Store) decideRetryable(row, next *dbsqlc.Dispatch, attempt int, r *Result, d *Decision, now time.Time) (changes, drop bool) {
	if row.State == StateInFlight {
		if attempt != currentAttempt(row) {
			d.Outcome, d.Reason = OutcomeDropped, "an older attempt's cause; a newer attempt is running"
			return false, false
		}
		if exhausted(row) {
			// The last attempt: the cause is the task's stand-in Fatal, held for a usable late result.
			d.Outcome = OutcomeFinal
			if s.lateWindow() == 0 {
				return true, true
			}
			s.hold(next, &Finished{attempt, queue.StatusFatal}, now)
			next.DeadLettered = true
			return true, false
		}
		next.LastCause = encodeCause(r.Messages)
		next.Deadline = now // due at the next reap
		next.Answered = true
		next.ReceivedAt = nil
		d.Outcome = OutcomeDeferred
		return true, false
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
		return true, false
	}
	return false, false
}

// locateResult is locate for a reply. A reply without a key follows the reference's rule (an
// unrecorded worker counts as the newest attempt). A reply with a key is attributed only to an
// attempt of a worker of that key: the worker's own newest attempt, else the key's newest
// attempt in the newest run it held one; nil when the key held none.
func locateResult(rows []*dbsqlc.Dispatch, taskRun int32, r *Result) (*dbsqlc.Dispatch, int) {
	if r.Key == "" {
		return locate(rows, taskRun, r.Worker)
	}
	prefix := keyPrefix(r.Key)
	exact := strings.HasPrefix(r.Worker, prefix)
	for _, match := range []func(string) bool{
		func(w string) bool { return exact && w == r.Worker },
		func(w string) bool { return strings.HasPrefix(w, prefix) },
	} {
		var found *dbsqlc.Dispatch
		attempt := -1
		for _, row := range rows {
			if found != nil && row.Run <= found.Run {
				continue
			}
			for i := len(row.AttemptWorkers) - 1; i >= 0; i-- {
				if match(row.AttemptWorkers[i]) {
					found, attempt = row, i
					break
				}
			}
		}
		if found != nil {
			return found, attempt
		}
	}
	return nil, -1
}
