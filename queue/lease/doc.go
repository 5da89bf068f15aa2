// Package lease is the Postgres lease state machine (docs/architecture.md#the-state-model,
// docs/semantics.md#transitions): every piece of dispatch state lives in rows (tasks, dispatch,
// attempts, task_message_logs), and every transition is one guarded transaction that takes its time
// from the database clock (or Config.NowFunc in tests). Several replicas share one database; a
// restarted replica has nothing to recover.
//
// # Rows
//
// A task's status is 0 TODO, 1 dispatched, or terminal (−1 NoProblem … −5 Invalid, −6 blocked),
// and its run grows with each operator rerun. A dispatch row per task and run is the task's
// lease: reserved (held by a replica for a hand-out, no worker yet, until the reservation's
// deadline), in_flight (leased to the last of attempt_workers until deadline), or settling —
// held for late results until forget_at, and, while queued, waiting for a worker to retry it.
// The attempts table records every attempt, one row per hand-out, with what became of it.
//
// # Transitions
//
// In the order a task meets them (queue/dispatch drives the first four):
//
//   - [Store.Reserve]: a batch of tasks of one service for this replica, ahead of demand, in a
//     transaction that commits before any is handed out: queued retries first, then TODO tasks by
//     fair share. Each is a reserved row; a [Reserved] lists the workers that worked an earlier
//     run still on record, who must not get it ([Reserved.For]). Fresh tasks take one statement
//     that needs no decision (sql/lease.sql ReserveFresh); the rest the full path, Go decisions
//     on locked rows.
//   - Hand-out, in memory: [Reserved.HandOut] gives a reserved task to a worker; nothing is
//     written, and the payload may be sent at once.
//   - [Store.Attribute]: a batch of hand-outs becomes durable in one statement: each row goes in
//     flight to its worker, leased_at and the deadline are stamped (the lease clock starts at
//     the hand-out), the attempts row is inserted. A hand-out whose row moved on is skipped.
//   - [Store.Release]: reservations not handed out go back, with no attempt counted: a fresh one
//     to TODO, a reserved retry to the queue. [Store.StillReserved] checks a stock against the
//     rows.
//   - [Store.BeginClaim], then [Claim.Commit]: decides a batch of replies, one per task, in one
//     transaction, the caller publishing the accepted results' archives between. A result is
//     Accepted, Superseded (a result that must stand already landed: a usable result beats a
//     failure, else the newer attempt wins), Stale (an earlier run's), or Unknown; a retryable
//     cause is Deferred, Final (the last attempt's stand-in Fatal) or Dropped ([KindRetryable]);
//     an unusable reply leaves the task in flight, answered, for the reaper. An accepted result
//     writes the task's status and messages and settles or deletes the row; a reply for a task
//     still reserved records its attempt at the claim. A publish failure leaves that task as it
//     was. [Store.KeyHoldsAttempt] is the cheap look before a claim under CURVE.
//   - [Store.ReapAll], the reaper's pass: [Store.ReleaseExpired] takes back reservations past
//     their deadline; [Store.Reap] settles in-flight rows past their deadline, queued for their
//     own service within the retry budget (queue.MaxDispatchRetries), else dead-lettered with
//     the last retryable cause or never_completed_with_retries as a stand-in Fatal that a late
//     result still replaces; [Store.Forget] deletes held rows past forget_at (a queued retry is
//     never forgotten).
//   - [Store.Rerun]: tasks of a scope go to TODO in a new run; fresh reservations of the old
//     run are deleted, its other open rows settle, so their late results are Stale; the runs
//     table keeps the old tallies. [Store.Pause] and [Store.Resume] block and unblock TODO tasks.
//   - [Store.PruneRuns] (cortexq prune): drops the history of old closed runs (their kept
//     statuses, diff matrices, and the attempts and message logs of tasks' earlier runs), a batch
//     of tasks per statement, never a task's current run (docs/operations.md#retention).
//
// The tests drive it through steps of their own (export_test.go; queue/queuetest/leasetest for
// other packages): Lease reserves, hands out and attributes at once; Claim takes the claim's
// steps with a publish step; Return undoes an attributed lease and Receive marks a result being
// written, which no production path does today.
//
// # Locks
//
// A transaction locks tasks before their dispatch rows, each in id order (Claim, Release,
// Rerun), and updates worker counters in one name order, so transactions that wait cannot wait
// in a cycle. Where a transaction must never wait — Reserve taking queued retries and TODO
// tasks, Reap taking expired rows, Forget — it locks with FOR UPDATE SKIP LOCKED and leaves a
// row that another transaction holds to the next call; that is also why two reapers at once, or
// four replicas reserving at once, split the work instead of blocking or double-leasing. The
// partial unique index dispatch_one_active refuses a second open row for a task.
//
// The reference dispatcher's 42 rule tests are ported in rules_test.go, which maps each one to
// its Go test.
package lease
