// Package lease is the Postgres lease state machine of DESIGN §4: every piece of dispatch state
// lives in rows (tasks, dispatch, attempts, task_messages), and every transition is one guarded
// transaction that takes its time from the database clock (or Config.NowFunc in tests). Several
// replicas share one database; a restarted replica has nothing to recover.
//
// # Rows
//
// A task's status is 0 TODO, 1 dispatched, or terminal (−1 NoProblem … −5 Invalid, −6 blocked),
// and its run grows with each operator rerun. A dispatch row per task and run is the task's
// lease: in_flight (leased to the last of attempt_workers until deadline), or settling — held
// for late results until forget_at, and, while queued, waiting for a worker to retry it. The
// attempts table records every attempt, one row per lease, with what became of it.
//
// # Transitions
//
//   - [Store.Lease]: for the workers asking for one service, queued retries first, then TODO
//     tasks; appends the worker to attempt_workers, stamps leased_at (the lease clock starts at
//     dispatch), inserts the attempts row, and commits before any payload is sent. A fresh lease
//     never goes to a worker that worked an earlier run still on record. Fresh tasks with no
//     rows of earlier runs, while no retry is queued, are leased by one statement that needs no
//     decision (sql/lease.sql); everything else by the full path, Go decisions on locked rows.
//   - [Store.Return]: the worker was unroutable after all; the lease is undone and no attempt
//     counts (a first attempt goes back to TODO, a retry back to the queue).
//   - [Store.Claim]: decides a batch of replies. A result is Accepted, Superseded (a result
//     that must stand already landed: a usable result beats a failure, else the newer attempt
//     wins), Stale (an earlier run's), or Unknown; a retryable cause is Deferred, Final (the
//     last attempt's stand-in Fatal) or Dropped (see [Store.Claim] and [KindRetryable]); an
//     unusable reply leaves the task in flight, answered, for the reaper. An accepted result
//     writes the task's status and messages and settles or deletes the row; a publish failure
//     leaves everything as it was.
//   - [Store.Reap]: in-flight rows past their deadline settle; within the retry budget
//     (queue.MaxDispatchRetries) they are queued for their own service, else dead-lettered with
//     the last retryable cause or never_completed_with_retries as a stand-in Fatal that a late
//     result still replaces. [Store.Receive] holds the reaper off a row whose result is being
//     written. [Store.Forget] deletes held rows past forget_at; a queued retry is never
//     forgotten.
//   - [Store.Rerun]: tasks of a scope go to TODO in a new run; open rows of the old run settle,
//     so their late results are Stale; the runs table keeps the old tallies.
//
// # Locks
//
// A transaction locks tasks before their dispatch rows, each in id order (Claim, Return,
// Rerun), and updates worker counters in one name order, so transactions that wait cannot wait
// in a cycle. Where a transaction must never wait — Lease taking queued retries and TODO tasks,
// Reap taking expired rows, Forget — it locks with FOR UPDATE SKIP LOCKED and leaves a row that
// another transaction holds to the next call; that is also why two reapers at once, or four
// replicas leasing at once, split the work instead of blocking or double-leasing. The partial
// unique index dispatch_one_active refuses a second in-flight-or-queued row for a task.
//
// # The reference's 42 rules
//
// Each test in the reference dispatcher's mod tests (DESIGN §5) is a Go test of this package:
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
