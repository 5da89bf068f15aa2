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
//   - [Store.ClaimWithHooks]: decides a batch of replies in one transaction. A result is
//     Accepted, Superseded (a result that must stand already landed: a usable result beats a
//     failure, else the newer attempt wins), Stale (an earlier run's), or Unknown; a retryable
//     cause is Deferred, Final (the last attempt's stand-in Fatal) or Dropped ([KindRetryable]);
//     an unusable reply leaves the task in flight, answered, for the reaper. An accepted result
//     writes the task's status and messages and settles or deletes the row; a reply for a task
//     still reserved records its attempt at the claim. A publish failure leaves everything as it
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
// other packages): Lease reserves, hands out and attributes at once; Claim is ClaimWithHooks with
// a publish step; Return undoes an attributed lease and Receive marks a result being written,
// which no production path does today.
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
// # The reference's 42 rules
//
// Each test in the reference dispatcher's mod tests (the in-memory CorTeX dispatcher, see
// docs/semantics.md) is a Go test of this package:
// in rules_test.go against a fresh Postgres database, and the log throttle in
// ratelimit_test.go. Where the reference's in-memory
// mechanism means nothing here, the port tests the invariant it protected; the note says so.
//
//	reference test (dispatcher-server.rs)                                Go test
//	reaper_honors_per_service_lease_timeouts                            TestReap/HonorsPerServiceLeaseTimeouts
//	reap_expired_into_tallies_requeue_and_dead_letter                   TestReap/TalliesRequeueAndDeadLetter
//	in_flight_saturation_is_inclusive_at_the_threshold                  TestBackpressure/SaturationIsInclusiveAtTheThreshold
//	backpressure_engages_below_the_hard_panic_bound                     TestBackpressure/EngagesBelowAnyHardBound
//	    invariant: there is no hard bound to stay under; a lease takes no more tasks than workers
//	    asked, and the unique index refuses a second active row for a task.
//	inflight_len_tracks_dispatch_and_drain                              TestInFlight/CountTracksDispatchAndDrain
//	    invariant: the in-flight count is count(*) of in_flight rows, not a counter kept beside a map.
//	inflight_count_ignores_duplicate_insert_and_negative_remove         TestInFlight/CountIgnoresDuplicateLeaseAndNegativeIDs
//	    invariant: no counter can drift; a leased task is not leased again, bogus ids are Unknown.
//	inflight_handles_200_concurrent_tasks_with_consistent_count         TestInFlight/TwoHundredConcurrentLeasesAndDrains
//	    invariant: 200 concurrent Lease and Claim transactions (SKIP LOCKED), not a sharded map.
//	classify_expired_retries_then_gives_up                              TestReap/RetriesThenGivesUp
//	rate_limited_log_emits_first_then_throttles_then_summarizes         TestRateLimitedLog/EmitsFirstThenThrottlesThenSummarizes
//	    not a lease rule: the limiter of the discard log (queue/wire), tested in ratelimit_test.go
//	    with an injected clock instead of a sleep.
//	reap_routes_to_own_service_and_drains                               TestReap/RoutesToOwnServiceAndDrains
//	    invariant: no per-service queue maps; a queued row keeps its service_id and only that
//	    service's requests lease it.
//	a_failed_sandbox_lookup_is_not_cached_as_an_ordinary_corpus         catalog.TestCatalog/FailedSandboxLookupIsNotCachedAsOrdinaryCorpus
//	the_sink_distinguishes_an_unknown_corpus_from_an_ordinary_one       catalog.TestCatalog/DistinguishesUnknownCorpusFromOrdinary
//	the_lease_clock_starts_at_dispatch_not_at_fetch                     TestLease/ClockStartsAtDispatchNotAtFetch
//	a_result_after_a_requeue_is_accepted_and_the_retry_is_not_leased    TestClaim/ResultAfterRequeueIsAcceptedAndRetryNotLeased
//	a_result_after_a_dead_letter_replaces_never_completed_and_stands    TestClaim/ResultAfterDeadLetterReplacesNeverCompletedAndStands
//	an_older_attempt_finishing_first_is_replaced_by_the_newer_one       TestClaim/OlderAttemptFinishingFirstIsReplacedByNewerOne
//	a_fresh_fetch_of_a_finished_task_is_leased                          TestLease/FreshFetchOfFinishedTaskIsLeased
//	    the rerun's fresh lease opens run 2 (attempt 0) beside run 1's held row, where the
//	    reference reused the slot as attempt 1; the old run's late result is still Stale.
//	a_newer_attempt_finishing_first_is_never_overwritten                TestClaim/NewerAttemptFinishingFirstIsNeverOverwritten
//	two_attempts_on_one_worker_attribute_to_the_newer                   TestClaim/TwoAttemptsOnOneWorkerAttributeToTheNewer
//	without_a_late_result_window_reaped_tasks_are_forgotten             TestReap/WithoutLateResultWindowReapedTasksAreForgotten
//	a_passed_late_result_window_is_forgotten_on_the_reap                TestReap/PassedLateResultWindowIsForgotten
//	    Forget is its own transaction (ReapAll runs both), checked through Store.Forget.
//	an_unusable_reply_leaves_the_task_in_flight_but_answered            TestUnusable/LeavesTheTaskInFlightButAnswered
//	held_tasks_are_not_in_flight                                        TestUnusable/HeldTasksAreNotInFlight
//	a_retryable_cause_retries_and_a_success_then_stands                 TestDefer/RetryableCauseRetriesAndSuccessThenStands
//	a_retryable_cause_on_the_last_attempt_is_its_stand_in               TestDefer/RetryableCauseOnLastAttemptIsItsStandIn
//	a_last_attempt_stand_in_is_restored_after_a_failed_publish          TestDefer/LastAttemptStandInIsRestoredAfterFailedPublish
//	    invariant: no note_publish_failed step; the failed result's writes are never made, so the
//	    stand-in's status and messages stay.
//	without_a_window_a_last_attempt_stand_in_leaves_the_set             TestDefer/WithoutWindowLastAttemptStandInLeavesTheSet
//	an_earlier_runs_result_never_lands_in_a_rerun_of_a_held_task        TestRerun/EarlierRunsResultNeverLandsInRerunOfHeldTask
//	an_earlier_runs_result_never_lands_in_a_rerun_of_an_in_flight_task  TestRerun/EarlierRunsResultNeverLandsInRerunOfInFlightTask
//	a_retry_of_an_earlier_run_never_takes_a_new_runs_slot               TestRerun/RetryOfEarlierRunNeverTakesNewRunsSlot
//	a_rerun_is_not_handed_to_a_worker_of_the_earlier_run                TestRerun/RerunIsNotHandedToWorkerOfEarlierRun
//	a_restarted_ventilator_keeps_every_held_task                        TestRestart/KeepsEveryHeldTask
//	    invariant: no restart step exists; a new Store on the same rows finds every row as it was.
//	a_restarted_ventilator_queues_the_held_retries_again                TestRestart/QueuesTheHeldRetriesAgain
//	    invariant: queued rows are leased by the new Store as they were by the old one.
//	a_single_attempt_failure_is_not_held                                TestClaim/SingleAttemptFailureIsNotHeld
//	an_unanswered_last_attempt_dead_letters_with_the_last_cause         TestDefer/UnansweredLastAttemptDeadLettersWithLastCause
//	a_good_result_replaces_a_newer_attempts_crash                       TestClaim/GoodResultReplacesNewerAttemptsCrash
//	a_publish_failure_restores_the_result_it_replaced                   TestClaim/PublishFailureRestoresTheResultItReplaced
//	    invariant: no note_publish_failed step; the replaced result's status and messages stay.
//	of_two_retryable_causes_the_newest_attempts_stands                  TestDefer/OfTwoRetryableCausesTheNewestAttemptsStands
//	a_late_good_result_is_not_replaced_by_a_newer_attempts_failure      TestClaim/LateGoodResultIsNotReplacedByNewerAttemptsFailure
//	an_older_attempts_retryable_cause_is_dropped_while_a_newer_runs     TestDefer/OlderAttemptsRetryableCauseIsDroppedWhileNewerRuns
//	a_retryable_cause_after_a_requeue_rides_to_the_retry                TestDefer/RetryableCauseAfterRequeueRidesToTheRetry
//	a_received_result_holds_off_the_reaper                              TestReap/ReceivedResultHoldsOffTheReaper
//
// Beyond the rules: TestInvariant/RandomOperations applies random Lease, Claim, Defer, Unusable,
// Reap, Forget, Rerun, Return, Receive and clock moves and checks sql/audit/invariants.sql after
// every step; TestConcurrency/FourReplicasLeaseClaimAndReap runs four replicas (pools) leasing,
// claiming and reaping 10,000 tasks at once on the database clock.
package lease
