-- Invariants of the lease state machine (docs/architecture.md#the-state-model), for operators and tests.
--
-- Each query is named by a `-- name:` line and returns the rows that violate its rule: an empty
-- result means the rule holds. Run one in psql, or all of them after every step of a test
-- (queue/lease/invariant_test.go reads this file). Plain SQL, no parameters.

-- name: DispatchedTaskHasOneActiveRow
-- (a) A dispatched task (status 1) has exactly one active row of its current run: in flight,
-- reserved by a replica, or queued for a retry. Without one it is stranded; with more it could
-- be leased twice.
SELECT t.id AS task_id, t.run, count(d.task_id) AS active_rows
FROM tasks t
LEFT JOIN dispatch d ON d.task_id = t.id AND d.run = t.run AND (d.state IN ('in_flight', 'reserved') OR d.queued)
WHERE t.status = 1
GROUP BY t.id, t.run
HAVING count(d.task_id) <> 1;

-- name: TaskHasAtMostOneActiveRow
-- (b) A task never has two active rows (in flight, reserved or queued), of any runs: in
-- particular it is reserved by at most one replica.
SELECT task_id, array_agg(run ORDER BY run) AS runs, array_agg(state ORDER BY run) AS states,
       array_agg(replica ORDER BY run) AS replicas, count(*) AS active_rows
FROM dispatch
WHERE state IN ('in_flight', 'reserved') OR queued
GROUP BY task_id
HAVING count(*) > 1;

-- name: UndispatchedTaskHasNoActiveRow
-- (c) A TODO, blocked or finished task (status <> 1) has no active row of its current run:
-- nothing could lease it again, no lease of it is running, and no replica holds it reserved.
SELECT t.id AS task_id, t.status, t.run, d.state, d.queued, d.attempt_workers
FROM tasks t
JOIN dispatch d ON d.task_id = t.id AND d.run = t.run
WHERE t.status <> 1 AND (d.state IN ('in_flight', 'reserved') OR d.queued);

-- name: InFlightRowMatchesAttempts
-- (d) An in-flight row has one attempts row per entry of attempt_workers.
SELECT d.task_id, d.run, cardinality(d.attempt_workers) AS workers, count(a.attempt) AS attempts
FROM dispatch d
LEFT JOIN attempts a ON a.task_id = d.task_id AND a.run = d.run
WHERE d.state = 'in_flight'
GROUP BY d.task_id, d.run, d.attempt_workers
HAVING count(a.attempt) <> cardinality(d.attempt_workers);

-- name: SettlingRowHasForgetAt
-- (e) A row out of flight knows when it is forgotten.
SELECT task_id, run, state, queued
FROM dispatch
WHERE state = 'settling' AND forget_at IS NULL;

-- name: RowRunNotAheadOfTask
-- (f) No row belongs to a run the task has not reached.
SELECT d.task_id, d.run, t.run AS task_run
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
WHERE d.run > t.run;

-- name: KeptRowAttemptsMatchWorkers
-- Every kept row's attempt_workers is its attempts rows, one by one: attempt i went to
-- attempt_workers[i+1], and there are no others. A fresh reservation has neither; a reserved
-- retry has its earlier attempts and none yet for the hand-out to come.
SELECT d.task_id, d.run, d.state, d.attempt_workers,
       coalesce(array_agg(a.worker ORDER BY a.attempt) FILTER (WHERE a.attempt IS NOT NULL), '{}') AS attempt_rows
FROM dispatch d
LEFT JOIN attempts a ON a.task_id = d.task_id AND a.run = d.run
GROUP BY d.task_id, d.run, d.state, d.attempt_workers
HAVING coalesce(array_agg(a.worker ORDER BY a.attempt) FILTER (WHERE a.attempt IS NOT NULL), '{}') IS DISTINCT FROM d.attempt_workers
    OR coalesce(max(a.attempt), -1) <> cardinality(d.attempt_workers) - 1;

-- name: QueuedRowIsCurrentAndOpen
-- A queued retry belongs to the task's current run and has no result and no dead letter: a
-- queued row of an earlier run would never be leased nor forgotten.
SELECT d.task_id, d.run, t.run AS task_run, d.finished_attempt, d.dead_lettered
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
WHERE d.queued AND (d.run <> t.run OR d.finished_attempt IS NOT NULL OR d.dead_lettered);

-- name: FinishedRowIsSettling
-- A row with a result that stands, or dead-lettered, is out of flight (and not reserved).
SELECT task_id, run, state, finished_attempt, dead_lettered
FROM dispatch
WHERE state IN ('in_flight', 'reserved') AND (finished_attempt IS NOT NULL OR dead_lettered);

-- name: StandingResultIsTaskStatus
-- The result that stands in the current run's row is the task's status; a dead letter with no
-- later result is a Fatal.
SELECT t.id AS task_id, t.run, t.status, d.finished_status, d.dead_lettered
FROM tasks t
JOIN dispatch d ON d.task_id = t.id AND d.run = t.run
WHERE (d.finished_status IS NOT NULL AND d.finished_status <> t.status)
   OR (d.finished_status IS NULL AND d.dead_lettered AND t.status <> -4);

-- name: TodoTaskHasNoRowOfItsRun
-- A TODO task has no row of its current run: a rerun moved it to a new run, and a returned
-- first lease deleted its row.
SELECT t.id AS task_id, t.run, d.state, d.queued
FROM tasks t
JOIN dispatch d ON d.task_id = t.id AND d.run = t.run
WHERE t.status = 0;

-- name: RowHasTask
-- Every dispatch row belongs to a task that exists. (No foreign key says so, for speed: the
-- lease and claim write rows only for the task they hold locked, and deleting a task deletes
-- its rows, attempts and messages through the tasks_deleted trigger.)
SELECT d.task_id, d.run, d.state
FROM dispatch d
WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = d.task_id);

-- name: ReservedRowIsOpen
-- A reserved row (docs/semantics.md#reserve, "Hand-out", "Attribute": a task a replica holds for a
-- hand-out, no worker recorded yet for the attempt it starts) is owned by a replica until a
-- deadline after it was reserved; it is not queued, answered, received, finished nor
-- dead-lettered, and nothing is due to forget it.
SELECT task_id, run, replica, leased_at AS reserved_at, deadline, queued, answered, received_at,
       finished_attempt, dead_lettered, forget_at
FROM dispatch
WHERE state = 'reserved'
  AND (replica = '' OR deadline < leased_at OR queued OR answered OR received_at IS NOT NULL
       OR finished_attempt IS NOT NULL OR dead_lettered OR forget_at IS NOT NULL);

-- name: ReservedRowIsCurrent
-- A reserved row belongs to its task's current run, and the task is dispatched: a rerun or a
-- pause takes reservations back, and a deleted task's rows go with it.
SELECT d.task_id, d.run, t.run AS task_run, t.status, d.replica
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
WHERE d.state = 'reserved' AND (d.run <> t.run OR t.status <> 1);

-- name: ReservedRowHasNoAttemptYet
-- No attempts row is recorded for the attempt a reservation starts: a fresh reservation has no
-- attempts rows at all, a reserved retry only those of its earlier attempts.
SELECT d.task_id, d.run, d.replica, cardinality(d.attempt_workers) AS attempt, a.worker, a.leased_at
FROM dispatch d
JOIN attempts a ON a.task_id = d.task_id AND a.run = d.run
WHERE d.state = 'reserved' AND a.attempt >= cardinality(d.attempt_workers);

-- name: TaskReservedOnce
-- A task is reserved by at most one replica, once.
SELECT task_id, array_agg(replica ORDER BY run) AS replicas, array_agg(run ORDER BY run) AS runs
FROM dispatch
WHERE state = 'reserved'
GROUP BY task_id
HAVING count(*) > 1;
