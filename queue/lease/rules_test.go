package lease

// The reference dispatcher's 42 rule tests (the in-memory CorTeX dispatcher, see
// docs/semantics.md), ported to Postgres: each is a Go test of this package, here against a
// fresh database, and the log throttle in ratelimit_test.go. Where the reference's in-memory
// mechanism means nothing here, the port tests the invariant it protected; the note says so.
//
//	reference test (the in-memory dispatcher's)                         Go test
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
//	a_received_result_holds_off_the_reaper                              TestReap/ResultAtTheDeadlineIsStillTaken
//	    invariant: no receipt mark holds the reaper off; a result the reaper raced is taken as a
//	    late result, within the late-result window.
//
// Beyond the rules: TestInvariant/RandomOperations applies random Lease, Claim, Defer, Unusable,
// Reap, Forget, Rerun, Return and clock moves and checks sql/audit/invariants.sql after
// every step; TestConcurrency/FourReplicasLeaseClaimAndReap runs four replicas (pools) leasing,
// claiming and reaping 10,000 tasks at once on the database clock.

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

func TestReap(t *testing.T) {
	t.Run("HonorsPerServiceLeaseTimeouts", func(t *testing.T) {
		f := newFixture(t)
		fast := f.service("fast", time.Minute)
		slow := f.service("slow", time.Hour)
		short := f.taskOf(fast)
		long := f.taskOf(slow)
		require.Len(t, f.leaseOf(fast, time.Minute, "wf"), 1)
		require.Len(t, f.leaseOf(slow, time.Hour, "ws"), 1)
		f.clock.Advance(100 * time.Second)
		require.Equal(t, ReapSummary{Requeued: 1}, f.reap())
		require.Equal(t, StateSettling, f.row(short).State, "the short lease expired")
		require.Equal(t, StateInFlight, f.row(long).State, "the slow service's lease is honored")
	})

	t.Run("TalliesRequeueAndDeadLetter", func(t *testing.T) {
		f := newFixture(t)
		f.leasedTo("w0")
		f.leasedTo("w0")
		dead := f.leasedTo("w0", "w1", "w2")
		require.Equal(t, ReapSummary{Requeued: 2, DeadLettered: 1}, f.reap())
		require.Zero(t, f.inFlight(), "nothing left in flight")
		require.Equal(t, queue.StatusFatal, f.status(dead), "the dead letter is recorded")
		require.Equal(t, whatsOf([]queue.Message{queue.NeverCompleted}), f.whats(dead))
	})

	t.Run("RetriesThenGivesUp", func(t *testing.T) {
		f := newFixture(t)
		retry := f.leasedTo("w0", "w1")      // retries 1: within budget
		give := f.leasedTo("w0", "w1", "w2") // retries 2: spent
		require.Equal(t, ReapSummary{Requeued: 1, DeadLettered: 1}, f.reap())
		r := f.row(retry)
		require.True(t, r.Queued)
		require.Equal(t, int32(2), r.Retries, "the retry count grows")
		require.Equal(t, queue.StatusDispatched, f.status(retry))
		require.Equal(t, queue.StatusFatal, f.status(give))
		require.True(t, f.row(give).DeadLettered)
	})

	t.Run("RoutesToOwnServiceAndDrains", func(t *testing.T) {
		f := newFixture(t)
		other := f.service("other", 0)
		retry := f.leasedTo("w0")
		dead := f.insertLeased(other, -100*testLease, []string{"w0", "w1", "w2"})
		require.Equal(t, ReapSummary{Requeued: 1, DeadLettered: 1}, f.reap())
		require.Empty(t, f.leaseOf(other, 0, "wx"), "another service's requester gets no retry")
		l := f.leaseOne("w1")
		require.Equal(t, retry, l.TaskID, "the retry goes to its own service")
		require.True(t, l.Retry)
		require.Equal(t, queue.StatusFatal, f.status(dead))
		require.Equal(t, 1, f.inFlight())
	})

	t.Run("PassedLateResultWindowIsForgotten", func(t *testing.T) {
		f := newFixture(t)
		id := f.task()
		past := f.clock.Now()
		f.upsert(dbsqlc.Dispatch{TaskID: id, Run: 1, State: StateSettling, AttemptWorkers: []string{"w0"},
			Deadline: past, Replica: "r1", ServiceID: f.svc, Retries: 2, LeaseTimeoutSeconds: 240,
			LeasedAt: past, DeadLettered: true, ForgetAt: &past})
		n, err := f.store.Forget(f.ctx, 0)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Zero(t, f.settling())
		require.Equal(t, OutcomeUnknown, f.claim(id, "w0", queue.StatusNoProblem).Outcome)
	})

	t.Run("WithoutLateResultWindowReapedTasksAreForgotten", func(t *testing.T) {
		f := newFixture(t, noWindow)
		id := f.leasedTo("w0")
		dead := f.leasedTo("w0", "w1", "w2")
		require.Equal(t, ReapSummary{Requeued: 1, DeadLettered: 1}, f.reap())
		require.Empty(t, f.rows(dead), "a dead letter is not held")
		require.Equal(t, OutcomeUnknown, f.claim(id, "w0", queue.StatusNoProblem).Outcome,
			"no window: a late result is not taken")
		require.Equal(t, id, f.leaseOne("w1").TaskID, "the queued retry still runs")
	})

	t.Run("ResultAtTheDeadlineIsStillTaken", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0")
		require.Equal(t, ReapSummary{Requeued: 1}, f.reap(), "the reaper wins the race")
		a, late := f.accepted(id, "w0", queue.StatusNoProblem)
		require.Equal(t, 0, a, "the first attempt's result is taken")
		require.Equal(t, LateAfterRequeue, late)
		require.Equal(t, queue.StatusNoProblem, f.status(id))
	})
}

func TestLease(t *testing.T) {
	t.Run("ClockStartsAtDispatchNotAtFetch", func(t *testing.T) {
		f := newFixture(t)
		id := f.task()
		f.clock.Advance(10 * testLease) // the task waited long before a worker asked
		l := f.leaseOne("w0")
		require.Equal(t, id, l.TaskID)
		now := f.clock.Now()
		require.True(t, l.LeasedAt.Equal(now), "stamped at dispatch")
		require.True(t, l.Deadline.Equal(now.Add(testLease)), "a full lease from dispatch")
		require.Equal(t, []string{"w0"}, f.row(id).AttemptWorkers)
		require.Equal(t, ReapSummary{}, f.reap(), "a just-leased task is not expired")
		require.Equal(t, 1, f.inFlight())
	})

	t.Run("FreshFetchOfFinishedTaskIsLeased", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0")
		f.reap()
		f.accepted(id, "w0", queue.StatusNoProblem)
		require.Empty(t, f.lease("w1"), "the queued retry is refused")
		f.rerun()
		l := f.leaseOne("w2")
		require.Equal(t, id, l.TaskID, "a rerun's fresh lease is not")
		require.Equal(t, int32(2), l.Run)
		require.Equal(t, 1, f.inFlight())
		require.Zero(t, f.settling()-1, "the old run's row is still held")
		require.Equal(t, OutcomeStale, f.claim(id, "w0", queue.StatusNoProblem).Outcome,
			"the old run's late result is told apart")
		a, _ := f.accepted(id, "w2", queue.StatusNoProblem)
		require.Equal(t, 0, a)
	})

	// Not a reference rule: the TODO scan starts past the last task leased (a cursor), and must
	// still find a task made TODO below it before any worker is told there is no work.
	t.Run("TodoTaskBelowTheCursorIsStillLeased", func(t *testing.T) {
		f := newFixture(t)
		a, b, c := f.task(), f.task(), f.task()
		got := f.lease("w0", "w1")
		require.Equal(t, []int64{a, b}, []int64{got[0].TaskID, got[1].TaskID})
		f.accepted(a, "w0", queue.StatusNoProblem)
		// Set back to TODO behind the store's back, as another process's rerun would.
		_, err := f.pool.Exec(f.ctx, `DELETE FROM dispatch WHERE task_id = $1`, a)
		require.NoError(t, err)
		_, err = f.pool.Exec(f.ctx, `UPDATE tasks SET status = 0, run = run + 1 WHERE id = $1`, a)
		require.NoError(t, err)
		got = f.lease("w2", "w3")
		ids := []int64{}
		for _, l := range got {
			ids = append(ids, l.TaskID)
		}
		require.ElementsMatch(t, []int64{a, c}, ids, "the task above the cursor and the one below it")
		require.Empty(t, f.lease("w4"), "nothing TODO is left")
	})
}

func TestClaim(t *testing.T) {
	t.Run("ResultAfterRequeueIsAcceptedAndRetryNotLeased", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0")
		require.Equal(t, 1, f.reap().Requeued)
		require.Equal(t, 0, f.inFlight())
		require.Equal(t, 1, f.settling())
		a, late := f.accepted(id, "w0", queue.StatusNoProblem)
		require.Equal(t, 0, a)
		require.Equal(t, LateAfterRequeue, late)
		require.Empty(t, f.lease("w1"), "the queued retry is dropped rather than converted again")
		require.Zero(t, f.inFlight())
		require.Equal(t, queue.StatusNoProblem, f.status(id), "no dead letter")
	})

	t.Run("ResultAfterDeadLetterReplacesNeverCompletedAndStands", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0", "w1", "w2")
		require.Equal(t, 1, f.reap().DeadLettered)
		require.Equal(t, queue.StatusFatal, f.status(id))
		a, late := f.accepted(id, "w2", queue.StatusNoProblem)
		require.Equal(t, 2, a)
		require.Equal(t, LateAfterDeadLetter, late)
		require.Equal(t, queue.StatusNoProblem, f.status(id))
		require.Equal(t, [][2]string{{"test", "w2"}}, f.whats(id), "the stand-in's message is gone")
		d := f.claim(id, "w0", queue.StatusNoProblem)
		require.Equal(t, OutcomeSuperseded, d.Outcome, "an older attempt must not overwrite a newer result")
		require.Equal(t, 0, d.Attempt)
		require.Equal(t, OutcomeSuperseded, f.claim(id, "w2", queue.StatusNoProblem).Outcome,
			"a repeat of the accepted attempt is not accepted twice")
	})

	t.Run("OlderAttemptFinishingFirstIsReplacedByNewerOne", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0")
		f.reap()
		f.leaseOne("w1")
		require.Equal(t, [2]int{1, 0}, [2]int{f.inFlight(), f.settling()})
		a, late := f.accepted(id, "w0", queue.StatusNoProblem)
		require.Equal(t, 0, a)
		require.Equal(t, LateOlderAttempt, late)
		require.Equal(t, [2]int{0, 1}, [2]int{f.inFlight(), f.settling()})
		a, late = f.accepted(id, "w1", queue.StatusNoProblem)
		require.Equal(t, 1, a)
		require.Equal(t, LateNewerAttempt, late)
		require.Equal(t, OutcomeSuperseded, f.claim(id, "w0", queue.StatusNoProblem).Outcome)
	})

	t.Run("NewerAttemptFinishingFirstIsNeverOverwritten", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0", "w1")
		a, late := f.accepted(id, "w1", queue.StatusNoProblem)
		require.Equal(t, 1, a)
		require.Equal(t, LateNone, late)
		require.Equal(t, [2]int{0, 0}, [2]int{f.inFlight(), f.settling()})
		require.Equal(t, OutcomeUnknown, f.claim(id, "w0", queue.StatusNoProblem).Outcome)
		require.Equal(t, queue.StatusNoProblem, f.status(id))
	})

	t.Run("TwoAttemptsOnOneWorkerAttributeToTheNewer", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0", "w1", "w0")
		a, late := f.accepted(id, "w0", queue.StatusNoProblem)
		require.Equal(t, 2, a)
		require.Equal(t, LateNone, late)
	})

	t.Run("SingleAttemptFailureIsNotHeld", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0")
		a, late := f.accepted(id, "w0", queue.StatusFatal)
		require.Equal(t, 0, a)
		require.Equal(t, LateNone, late)
		require.Zero(t, f.settling(), "nothing could replace it")
		require.Empty(t, f.rows(id))
	})

	t.Run("GoodResultReplacesNewerAttemptsCrash", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0", "w1")
		a, late := f.accepted(id, "w1", queue.StatusFatal)
		require.Equal(t, 1, a)
		require.Equal(t, LateNone, late)
		require.Equal(t, 1, f.settling(), "a failure is held for a better result")
		d := f.claim(id, "w0", queue.StatusWarning)
		require.Equal(t, OutcomeAccepted, d.Outcome)
		require.Equal(t, 0, d.Attempt)
		require.Equal(t, LateReplacesFailure, d.Late)
		require.Equal(t, &Finished{Attempt: 1, Status: queue.StatusFatal}, d.Replaced)
		require.Equal(t, OutcomeSuperseded, f.claim(id, "w1", queue.StatusFatal).Outcome, "and stands against a later failure")
		require.Equal(t, queue.StatusWarning, f.status(id))
	})

	t.Run("PublishFailureRestoresTheResultItReplaced", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0", "w1")
		f.accepted(id, "w0", queue.StatusNoProblem) // older, held
		failing := func(d *Decision) error { return errors.New("disk full") }
		d := f.reply(Result{TaskID: id, Worker: "w1", Kind: KindReport, Status: queue.StatusWarning}, failing)
		require.Equal(t, OutcomePublishFail, d.Outcome)
		require.Equal(t, &Finished{Attempt: 0, Status: queue.StatusNoProblem}, d.Replaced)
		require.Equal(t, queue.StatusNoProblem, f.status(id), "the replaced result stands")
		require.Equal(t, [][2]string{{"test", "w0"}}, f.whats(id))
		d = f.claim(id, "w1", queue.StatusFatal)
		require.Equal(t, OutcomeSuperseded, d.Outcome, "attempt 0's good result stands again")
	})

	t.Run("LateGoodResultIsNotReplacedByNewerAttemptsFailure", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0", "w1")
		a, late := f.accepted(id, "w0", queue.StatusWarning)
		require.Equal(t, 0, a)
		require.Equal(t, LateOlderAttempt, late)
		require.Equal(t, OutcomeDropped, f.deferCause(id, "w1", timeoutCause()).Outcome)
		d := f.claim(id, "w1", queue.StatusFatal)
		require.Equal(t, OutcomeSuperseded, d.Outcome)
		require.Equal(t, 1, d.Attempt)
		a, late = f.accepted(id, "w1", queue.StatusNoProblem)
		require.Equal(t, 1, a, "a newer attempt's usable result still replaces it")
		require.Equal(t, LateNewerAttempt, late)
	})
}

func TestUnusable(t *testing.T) {
	t.Run("LeavesTheTaskInFlightButAnswered", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0")
		require.False(t, f.row(id).Answered)
		f.unusable(id, "w0")
		f.unusable(id, "w0")
		r := f.row(id)
		require.Equal(t, StateInFlight, r.State)
		require.True(t, r.Answered, "awaits no reply")
		require.Equal(t, 1, f.inFlight())
		a, late := f.accepted(id, "w0", queue.StatusNoProblem)
		require.Equal(t, 0, a, "a usable reply after all is still accepted")
		require.Equal(t, LateNone, late)
		require.Zero(t, f.inFlight())
		other := f.leasedTo("w0")
		f.unusable(other, "w0")
		require.Equal(t, ReapSummary{Requeued: 1}, f.reap(), "the reaper still takes an answered task")
		require.Equal(t, [2]int{0, 1}, [2]int{f.inFlight(), f.settling()})
	})

	t.Run("HeldTasksAreNotInFlight", func(t *testing.T) {
		f := newFixture(t)
		held := f.leasedTo("w0")
		live := f.leasedNowTo("w0")
		f.reap()
		require.Equal(t, 1, f.inFlight())
		require.Equal(t, StateInFlight, f.row(live).State)
		require.Equal(t, StateSettling, f.row(held).State)
		require.Equal(t, OutcomeAccepted, f.claim(held, "w0", queue.StatusNoProblem).Outcome, "a result can still find it")
	})
}

func TestDefer(t *testing.T) {
	t.Run("RetryableCauseRetriesAndSuccessThenStands", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0")
		require.Equal(t, ReapSummary{}, f.reap(), "not due")
		require.Equal(t, OutcomeDeferred, f.deferCause(id, "w0", timeoutCause()).Outcome)
		require.True(t, f.row(id).Answered, "only the reaper moves it on")
		require.Equal(t, ReapSummary{Requeued: 1}, f.reap(), "due at the next reap")
		l := f.leaseOne("w1")
		require.Equal(t, whatsOf(timeoutCause()), whatsOf(l.LastCause), "the cause rides along")
		a, late := f.accepted(id, "w1", queue.StatusWarning)
		require.Equal(t, 1, a)
		require.Equal(t, LateNone, late)
		require.Equal(t, queue.StatusWarning, f.status(id))
	})

	t.Run("RetryableCauseOnLastAttemptIsItsStandIn", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0", "w1", "w2")
		require.Equal(t, OutcomeFinal, f.deferCause(id, "w2", timeoutCause()).Outcome)
		require.Equal(t, [2]int{0, 1}, [2]int{f.inFlight(), f.settling()})
		require.Equal(t, queue.StatusFatal, f.status(id))
		require.Equal(t, whatsOf(timeoutCause()), f.whats(id))
		a, late := f.accepted(id, "w0", queue.StatusNoProblem)
		require.Equal(t, 0, a)
		require.Equal(t, LateReplacesFailure, late)
	})

	t.Run("LastAttemptStandInIsRestoredAfterFailedPublish", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0", "w1", "w2")
		require.Equal(t, OutcomeFinal, f.deferCause(id, "w2", timeoutCause()).Outcome)
		d := f.reply(Result{TaskID: id, Worker: "w0", Kind: KindReport, Status: queue.StatusNoProblem},
			func(*Decision) error { return errors.New("rename failed") })
		require.Equal(t, OutcomePublishFail, d.Outcome)
		require.Equal(t, LateReplacesFailure, d.Late)
		require.Equal(t, &Finished{Attempt: 2, Status: queue.StatusFatal}, d.Replaced)
		require.Equal(t, queue.StatusFatal, f.status(id), "the stand-in stands")
		d = f.claim(id, "w1", queue.StatusFatal)
		require.Equal(t, OutcomeSuperseded, d.Outcome, "another failure cannot replace it")
		a, late := f.accepted(id, "w1", queue.StatusWarning)
		require.Equal(t, 1, a, "a usable result still can")
		require.Equal(t, LateReplacesFailure, late)
	})

	t.Run("WithoutWindowLastAttemptStandInLeavesTheSet", func(t *testing.T) {
		f := newFixture(t, noWindow)
		id := f.leasedNowTo("w0", "w1", "w2")
		require.Equal(t, OutcomeFinal, f.deferCause(id, "w2", timeoutCause()).Outcome)
		require.Equal(t, [2]int{0, 0}, [2]int{f.inFlight(), f.settling()})
		require.Empty(t, f.rows(id))
		require.Equal(t, queue.StatusFatal, f.status(id))
	})

	t.Run("UnansweredLastAttemptDeadLettersWithLastCause", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0", "w1")
		require.Equal(t, OutcomeDeferred, f.deferCause(id, "w1", timeoutCause()).Outcome)
		require.Equal(t, 1, f.reap().Requeued)
		f.leaseOne("w2")
		f.clock.Advance(4 * testLease)
		require.Equal(t, ReapSummary{DeadLettered: 1}, f.reap())
		require.Equal(t, queue.StatusFatal, f.status(id))
		require.Equal(t, whatsOf(timeoutCause()), f.whats(id), "the last cause, not never_completed_with_retries")
		a, late := f.accepted(id, "w0", queue.StatusNoProblem)
		require.Equal(t, 0, a)
		require.Equal(t, LateAfterDeadLetter, late)
	})

	t.Run("OfTwoRetryableCausesTheNewestAttemptsStands", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0", "w1")
		require.Equal(t, 1, f.reap().Requeued)
		require.Equal(t, OutcomeDropped, f.deferCause(id, "w0", timeoutCause()).Outcome)
		require.Equal(t, OutcomeDeferred, f.deferCause(id, "w1", shedCause()).Outcome)
		require.Equal(t, OutcomeDropped, f.deferCause(id, "w0", timeoutCause()).Outcome)
		l := f.leaseOne("w2")
		require.Equal(t, whatsOf(shedCause()), whatsOf(l.LastCause))
	})

	t.Run("OlderAttemptsRetryableCauseIsDroppedWhileNewerRuns", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0", "w1")
		require.Equal(t, OutcomeDropped, f.deferCause(id, "w0", timeoutCause()).Outcome)
		require.Equal(t, ReapSummary{}, f.reap(), "the newer attempt keeps its lease")
		f.unusable(id, "w0")
		require.False(t, f.row(id).Answered, "an older attempt's unusable reply does not mark it answered")
	})

	t.Run("RetryableCauseAfterRequeueRidesToTheRetry", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0")
		f.reap()
		require.Equal(t, OutcomeDeferred, f.deferCause(id, "w0", timeoutCause()).Outcome)
		l := f.leaseOne("w1")
		require.Equal(t, id, l.TaskID)
		require.Equal(t, whatsOf(timeoutCause()), whatsOf(l.LastCause))
	})
}

func TestRerun(t *testing.T) {
	t.Run("EarlierRunsResultNeverLandsInRerunOfHeldTask", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0")
		require.Equal(t, 1, f.reap().Requeued)
		require.Equal(t, RerunSummary{Tasks: 1, Settled: 1}, f.rerun())
		l := f.leaseOne("w1")
		require.False(t, l.Retry, "leased afresh")
		require.Equal(t, int32(2), l.Run)
		d := f.claim(id, "w0", queue.StatusNoProblem)
		require.Equal(t, OutcomeStale, d.Outcome)
		require.Equal(t, 0, d.Attempt)
		a, late := f.accepted(id, "w1", queue.StatusFatal)
		require.Equal(t, 0, a, "the new run's own Fatal stands")
		require.Equal(t, LateNone, late)
		require.Equal(t, queue.StatusFatal, f.status(id))
	})

	t.Run("EarlierRunsResultNeverLandsInRerunOfInFlightTask", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0")
		f.rerun()
		f.leaseOne("w1")
		require.Equal(t, OutcomeDropped, f.deferCause(id, "w0", timeoutCause()).Outcome)
		require.Equal(t, OutcomeStale, f.claim(id, "w0", queue.StatusNoProblem).Outcome)
		f.clock.Advance(2 * testLease)
		require.Equal(t, ReapSummary{Requeued: 1}, f.reap(), "the new run's lease is reaped when due")
		a, late := f.accepted(id, "w1", queue.StatusWarning)
		require.Equal(t, 0, a)
		require.Equal(t, LateAfterRequeue, late)
	})

	t.Run("RetryOfEarlierRunNeverTakesNewRunsSlot", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedNowTo("w0")
		f.rerun()
		f.leaseOne("w1")
		f.clock.Advance(2 * testLease)
		sum := f.reap()
		require.Equal(t, ReapSummary{Requeued: 1}, sum, "only the new run's lease is reaped")
		rs := f.rows(id)
		require.Len(t, rs, 2)
		require.False(t, rs[0].Queued, "the old run queues no retry")
		l := f.leaseOne("w2")
		require.Equal(t, int32(2), l.Run, "the retry is the new run's")
		a, _ := f.accepted(id, "w2", queue.StatusNoProblem)
		require.Equal(t, 1, a)
	})

	t.Run("RerunIsNotHandedToWorkerOfEarlierRun", func(t *testing.T) {
		f := newFixture(t)
		id := f.leasedTo("w0")
		f.reap()
		f.rerun()
		require.Empty(t, f.lease("w0"), "w0 worked the earlier run")
		require.Equal(t, queue.StatusTODO, f.status(id), "the task stays for another worker")
		l := f.leaseOne("w1")
		require.Equal(t, "w1", l.Worker)
		require.Equal(t, []string{"w1"}, f.row(id).AttemptWorkers)
	})
}

func TestRestart(t *testing.T) {
	// A restart is a new Store on a new pool: nothing is reset, every row is where it was.
	restarted := func(f *fixture) *fixture {
		return &fixture{t: f.t, ctx: f.ctx, pool: f.pool, clock: f.clock, corpus: f.corpus, svc: f.svc,
			store: New(f.pool, Config{Replica: "r2", LeaseTimeout: testLease, NowFunc: f.clock.Now})}
	}

	t.Run("KeepsEveryHeldTask", func(t *testing.T) {
		f := newFixture(t)
		live := f.leasedNowTo("w0")
		queued := f.leasedTo("w0")
		dead := f.leasedTo("w0", "w1", "w2")
		late := f.leasedTo("w0")
		f.reap()
		f.accepted(late, "w0", queue.StatusNoProblem)
		g := restarted(f)
		for _, id := range []int64{live, queued, dead, late} {
			require.NotEmpty(t, g.rows(id), "task %d keeps its row", id)
		}
		require.Equal(t, []queue.Status{queue.StatusDispatched, queue.StatusDispatched, queue.StatusFatal, queue.StatusNoProblem},
			[]queue.Status{g.status(live), g.status(queued), g.status(dead), g.status(late)})
		leases := g.lease("a", "b", "c")
		require.Len(t, leases, 1, "only the queued task is leased again")
		require.Equal(t, queued, leases[0].TaskID)
	})

	t.Run("QueuesTheHeldRetriesAgain", func(t *testing.T) {
		f := newFixture(t)
		retry := f.leasedTo("w0")
		f.leasedTo("w0", "w1", "w2") // exhausted: dead-lettered, not queued
		finished := f.leasedTo("w0")
		f.reap()
		f.accepted(finished, "w0", queue.StatusNoProblem) // a late result takes it off the queue
		g := restarted(f)
		leases := g.lease("w9", "w8")
		require.Len(t, leases, 1)
		require.Equal(t, retry, leases[0].TaskID)
		require.True(t, leases[0].Retry)
		require.Equal(t, 1, leases[0].Attempt)
		require.Equal(t, []string{"w0", "w9"}, g.row(retry).AttemptWorkers)
	})
}

func TestInFlight(t *testing.T) {
	t.Run("CountTracksDispatchAndDrain", func(t *testing.T) {
		f := newFixture(t)
		f.task()
		f.task()
		require.Zero(t, f.inFlight())
		leases := f.lease("w0", "w1")
		require.Len(t, leases, 2)
		require.Equal(t, 2, f.inFlight(), "two tasks now in flight")
		f.accepted(leases[0].TaskID, "w0", queue.StatusNoProblem)
		require.Equal(t, 1, f.inFlight(), "a claimed result drains it")
	})

	t.Run("CountIgnoresDuplicateLeaseAndNegativeIDs", func(t *testing.T) {
		f := newFixture(t)
		id := f.task()
		f.leaseOne("w0")
		require.Empty(t, f.lease("w1"), "a leased task is not leased again")
		require.Equal(t, 1, f.inFlight())
		for _, bogus := range []int64{-1, 0, id + 1000} {
			require.Equal(t, OutcomeUnknown, f.claim(bogus, "w0", queue.StatusNoProblem).Outcome)
		}
		require.Equal(t, 1, f.inFlight())
		f.accepted(id, "w0", queue.StatusNoProblem)
		require.Zero(t, f.inFlight())
		require.Equal(t, OutcomeUnknown, f.claim(id, "w0", queue.StatusNoProblem).Outcome, "a repeat is a no-op")
		require.Zero(t, f.inFlight())
	})

	t.Run("TwoHundredConcurrentLeasesAndDrains", func(t *testing.T) {
		f := newFixture(t)
		const n = 200
		for range n {
			f.task()
		}
		var mu sync.Mutex
		got := map[int64]string{}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				w := fmt.Sprintf("w%d", i)
				leases, err := f.store.Lease(f.ctx, LeaseRequest{ServiceID: f.svc, Workers: []string{w}})
				// SKIP LOCKED: a request that finds every TODO task left held by concurrent
				// leases' transactions (each locks a few rows past the one it takes, for fair
				// share) gets nothing, as a worker gets no work; asked again, it gets one.
				for try := 0; err == nil && len(leases) == 0 && try < 50; try++ {
					time.Sleep(10 * time.Millisecond)
					leases, err = f.store.Lease(f.ctx, LeaseRequest{ServiceID: f.svc, Workers: []string{w}})
				}
				if err != nil || len(leases) != 1 {
					t.Errorf("lease for %s: %v %v", w, leases, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if prev, dup := got[leases[0].TaskID]; dup {
					t.Errorf("task %d leased to %s and %s", leases[0].TaskID, prev, w)
				}
				got[leases[0].TaskID] = w
			})
		}
		wg.Wait()
		require.Len(t, got, n, "all 200 leases tracked")
		require.Equal(t, n, f.inFlight())
		var accepted sync.Map
		for id, w := range got {
			wg.Go(func() {
				ds, err := f.store.Claim(f.ctx, []Result{{TaskID: id, Worker: w, Status: queue.StatusNoProblem}}, nil)
				if err == nil && ds[0].Outcome == OutcomeAccepted {
					accepted.Store(id, true)
				} else {
					t.Errorf("claim %d: %v %v", id, ds, err)
				}
			})
		}
		wg.Wait()
		count := 0
		accepted.Range(func(any, any) bool { count++; return true })
		require.Equal(t, n, count, "each task drained exactly once")
		require.Zero(t, f.inFlight())
	})
}

func TestBackpressure(t *testing.T) {
	t.Run("SaturationIsInclusiveAtTheThreshold", func(t *testing.T) {
		require.False(t, queue.Saturated(0, 5))
		require.False(t, queue.Saturated(4, 5))
		require.True(t, queue.Saturated(5, 5), "at the threshold we already hold back")
		require.True(t, queue.Saturated(6, 5))
	})

	// The reference guarded a panic bound above its backpressure threshold. Here the database
	// bounds the set: a lease never takes more tasks than workers asked, and no task can have
	// two active rows.
	t.Run("EngagesBelowAnyHardBound", func(t *testing.T) {
		f := newFixture(t)
		for range 10 {
			f.task()
		}
		require.Len(t, f.lease("a", "b", "c"), 3)
		require.Equal(t, 3, f.inFlight())
		id := f.leasedNowTo("w0")
		now := f.clock.Now()
		doc := fmt.Sprintf(`[{"task_id":%d,"run":2,"state":"in_flight","attempt_workers":["x"],"deadline":%q,"answered":false,"queued":false,"replica":"r1","service_id":%d,"retries":0,"lease_timeout_seconds":60,"leased_at":%q,"dead_lettered":false}]`,
			id, now.Format(time.RFC3339Nano), f.svc, now.Format(time.RFC3339Nano))
		err := dispatchUpsert(f.ctx, f.pool, []byte(doc))
		require.Error(t, err, "a second active row for one task is refused")
		require.ErrorIs(t, translate("upsert", err), queue.ErrDuplicate)
	})
}
