-- Invariants of the lease state machine (DESIGN §4), for operators and tests.
--
-- Each query is named by a `-- name:` line and returns the rows that violate its rule: an empty
-- result means the rule holds. Run one in psql, or all of them after every step of a test
-- (queue/lease/invariant_test.go reads this file). Plain SQL, no parameters.

-- name: DispatchedTaskHasOneActiveRow
-- (a) A dispatched task (status 1) has exactly one active row of its current run: in flight, or
-- queued for a retry. Without one it is stranded; with more it could be leased twice.
SELECT t.id AS task_id, t.run, count(d.task_id) AS active_rows
FROM tasks t
LEFT JOIN dispatch d ON d.task_id = t.id AND d.run = t.run AND (d.state = 'in_flight' OR d.queued)
WHERE t.status = 1
GROUP BY t.id, t.run
HAVING count(d.task_id) <> 1;

-- name: TaskHasAtMostOneActiveRow
-- (b) A task never has two active rows, of any runs.
SELECT task_id, array_agg(run ORDER BY run) AS runs, count(*) AS active_rows
FROM dispatch
WHERE state = 'in_flight' OR queued
GROUP BY task_id
HAVING count(*) > 1;

-- name: UndispatchedTaskHasNoActiveRow
-- (c) A TODO or finished task (status <> 1) has no active row of its current run: nothing could
-- lease it again, and no lease of it is running.
SELECT t.id AS task_id, t.status, t.run, d.state, d.queued, d.attempt_workers
FROM tasks t
JOIN dispatch d ON d.task_id = t.id AND d.run = t.run
WHERE t.status <> 1 AND (d.state = 'in_flight' OR d.queued);

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
-- attempt_workers[i+1], and there are no others.
SELECT d.task_id, d.run, d.attempt_workers, array_agg(a.worker ORDER BY a.attempt) AS attempt_rows
FROM dispatch d
LEFT JOIN attempts a ON a.task_id = d.task_id AND a.run = d.run
GROUP BY d.task_id, d.run, d.attempt_workers
HAVING array_agg(a.worker ORDER BY a.attempt) IS DISTINCT FROM d.attempt_workers
    OR coalesce(max(a.attempt), -1) <> cardinality(d.attempt_workers) - 1;

-- name: QueuedRowIsCurrentAndOpen
-- A queued retry belongs to the task's current run and has no result and no dead letter: a
-- queued row of an earlier run would never be leased nor forgotten.
SELECT d.task_id, d.run, t.run AS task_run, d.finished_attempt, d.dead_lettered
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
WHERE d.queued AND (d.run <> t.run OR d.finished_attempt IS NOT NULL OR d.dead_lettered);

-- name: FinishedRowIsSettling
-- A row with a result that stands, or dead-lettered, is out of flight.
SELECT task_id, run, state, finished_attempt, dead_lettered
FROM dispatch
WHERE state = 'in_flight' AND (finished_attempt IS NOT NULL OR dead_lettered);

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
