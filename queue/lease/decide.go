package lease

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Row states of dispatch.state.
const (
	// StateReserved: held by a replica for a hand-out until its deadline, no worker yet.
	StateReserved = "reserved"
	StateInFlight = "in_flight"
	StateSettling = "settling"
)

// leaseDeadline is when a lease of d started at leasedAt expires: its attempt's share of the
// lease grows with each retry, (retries + 1) × lease. sql/lease.sql's Attribute computes the
// same in SQL; nothing else does.
func leaseDeadline(d *dbsqlc.Dispatch, leasedAt time.Time) time.Time {
	return leasedAt.Add(time.Duration(d.Retries+1) * time.Duration(d.LeaseTimeoutSeconds) * time.Second)
}

// leaseSeconds is a service's lease as a row captures it at its first reservation: whole seconds,
// at least one. Both reservation paths store it; leaseDeadline and Attribute multiply it.
func leaseSeconds(timeout time.Duration) int32 { return int32(max(timeout/time.Second, 1)) }

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

func cloneRow(d *dbsqlc.Dispatch) *dbsqlc.Dispatch {
	c := *d
	c.AttemptWorkers = slices.Clone(d.AttemptWorkers)
	return &c
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

func encodeCause(msgs []queue.Message) json.RawMessage {
	if len(msgs) == 0 {
		return nil
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		return nil
	}
	return b
}

func decodeCause(raw json.RawMessage) []queue.Message {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var msgs []queue.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil
	}
	return msgs
}

func ptrTime(t time.Time) *time.Time { return &t }
