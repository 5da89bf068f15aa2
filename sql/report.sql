-- The queries behind `cortexq report`, `runs`, `diff` and `sandbox` (docs/reports.md shows
-- them for psql). They only read, in plain snapshots: no lock a claim or a rerun waits on.

-- name: ReportStatuses :many
-- ReportStatuses counts the tasks of a corpus and service by status, from the task_totals ledger
-- (migrations/00013_task_totals.sql): exact, without counting the tasks.
SELECT status, sum(tasks)::bigint AS tasks
FROM task_totals
WHERE corpus_id = @corpus_id AND service_id = @service_id
GROUP BY status
HAVING sum(tasks) <> 0;

-- name: ReportCategories :many
-- ReportCategories lists the categories of the messages of a status's severity in the current
-- runs of the tasks with that status, with the tasks having one and the messages, as of the last
-- fold (report_rollup); with no_messages, the tasks with no such message are a category
-- no_messages of their own (kept for Fatal). Page of a sorted list (most tasks first), with the
-- list's length.
WITH cats AS (
    SELECT r.category, r.tasks, r.messages
    FROM report_rollup r
    WHERE r.corpus_id = @corpus_id AND r.service_id = @service_id AND r.status = @status
      AND r.level = rollup_category() AND r.tasks > 0
    UNION ALL
    SELECT 'no_messages', s.tasks - coalesce(a.tasks, 0), 0::bigint
    FROM report_rollup s
    LEFT JOIN report_rollup a ON a.corpus_id = s.corpus_id AND a.service_id = s.service_id
         AND a.status = s.status AND a.level = rollup_messaged() AND a.category = '' AND a.what = ''
    WHERE @no_messages::bool AND s.corpus_id = @corpus_id AND s.service_id = @service_id
      AND s.status = @status AND s.level = rollup_status() AND s.category = '' AND s.what = ''
      AND s.tasks - coalesce(a.tasks, 0) > 0
)
SELECT category::text AS category, tasks::bigint AS tasks, messages::bigint AS messages,
       count(*) OVER ()::bigint AS total
FROM cats
ORDER BY tasks DESC, messages DESC, category
LIMIT @lim OFFSET @off;

-- name: ReportWhats :many
-- ReportWhats lists the whats of one category, as ReportCategories lists categories.
SELECT r.what, r.tasks, r.messages, count(*) OVER ()::bigint AS total
FROM report_rollup r
WHERE r.corpus_id = @corpus_id AND r.service_id = @service_id AND r.status = @status
  AND r.level = rollup_what() AND r.category = @category AND r.tasks > 0
ORDER BY r.tasks DESC, r.messages DESC, r.what
LIMIT @lim OFFSET @off;

-- name: ReportFoldTake :many
-- ReportFoldTake takes a batch of the noted changes: up to @batch task ids from report_changes
-- (every note of each, deleted) and, per id, what the task contributed when last folded (the
-- old_ columns, from report_folded; old_status 0: nothing) and what it is now: its scope and
-- final status (status 0: not final, or deleted) and the kinds of its current run's log, in log
-- order (empty: no log). changes is the number of notes taken, the same in every row. One statement, one
-- snapshot: a change committed after it began is taken next time. The caller holds the fold's
-- advisory lock (ReportFoldLock) and works out the rest (reports.Store.foldBatch): two folds at
-- once would subtract a task's contribution twice.
WITH ids AS (
    SELECT DISTINCT c.task_id AS id
    FROM (SELECT task_id FROM report_changes LIMIT @batch::int) AS c
), changed AS (
    DELETE FROM report_changes c WHERE c.task_id IN (SELECT id FROM ids) RETURNING c.task_id
)
-- One primary-key probe per id and table, whatever the statistics say: LIMIT 1 keeps the planner
-- from flattening a lateral subquery into a join it may order the other way (with tasks analyzed
-- while nearly empty it scanned tasks and, for each row, every id: 7.5 s for 5,000).
SELECT ids.id::bigint AS task_id, (SELECT count(*) FROM changed)::bigint AS changes,
       coalesce(f.corpus_id, 0)::int AS old_corpus_id, coalesce(f.service_id, 0)::int AS old_service_id,
       coalesce(f.status, 0)::smallint AS old_status,
       coalesce(f.kinds, '{}')::int[] AS old_kinds, coalesce(f.counts, '{}')::int[] AS old_counts,
       coalesce(t.corpus_id, 0)::int AS corpus_id, coalesce(t.service_id, 0)::int AS service_id,
       coalesce(t.status, 0)::smallint AS status, coalesce(l.kinds, '{}')::int[] AS kinds
FROM ids
LEFT JOIN LATERAL (SELECT x.corpus_id, x.service_id, x.status, x.kinds, x.counts
                   FROM report_folded x
                   WHERE x.task_id = ids.id
                   LIMIT 1) f ON true
LEFT JOIN LATERAL (SELECT x.corpus_id, x.service_id, x.status, x.run
                   FROM tasks x
                   WHERE x.id = ids.id AND x.status BETWEEN -5 AND -1
                   LIMIT 1) t ON true
LEFT JOIN LATERAL (SELECT y.kinds
                   FROM task_message_logs y
                   WHERE y.task_id = ids.id AND y.run = t.run
                   LIMIT 1) l ON true
ORDER BY ids.id;

-- name: ReportKindNames :many
-- ReportKindNames names the message_kinds ids @ids.
SELECT k.id, k.severity, k.category::text AS category, k.what::text AS what
FROM message_kinds k
WHERE k.id = ANY (@ids::int[]);

-- name: ReportFoldPut :exec
-- ReportFoldPut records what the tasks @task_ids contribute now (report_folded): task i's kinds
-- and their messages are @kinds[i] and @counts[i], integer arrays written as text ('{1,2}').
-- Text, not slices of flat integer arrays: slicing a parameter array copies all of it, and a
-- batch's kinds are tens of thousands (docs/performance.md, "Messages").
INSERT INTO report_folded AS f (task_id, corpus_id, service_id, status, kinds, counts)
SELECT t.task_id, t.corpus_id, t.service_id, t.status, t.kinds::int[], t.counts::int[]
FROM (SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@corpus_ids::int[]) AS corpus_id,
             unnest(@service_ids::int[]) AS service_id, unnest(@statuses::smallint[]) AS status,
             unnest(@kinds::text[]) AS kinds, unnest(@counts::text[]) AS counts) AS t
ORDER BY t.task_id
ON CONFLICT (task_id) DO UPDATE
SET corpus_id = excluded.corpus_id, service_id = excluded.service_id, status = excluded.status,
    kinds = excluded.kinds, counts = excluded.counts;

-- name: ReportFoldGone :exec
-- ReportFoldGone forgets the tasks @task_ids, which contribute nothing now.
DELETE FROM report_folded WHERE task_id = ANY (@task_ids::bigint[]);

-- name: ReportRollupAdd :exec
-- ReportRollupAdd adds a fold's changes to report_rollup, a row each (keys in order: the fold
-- computes them sorted).
INSERT INTO report_rollup AS r (corpus_id, service_id, status, level, category, what, tasks, messages)
SELECT unnest(@corpus_ids::int[]), unnest(@service_ids::int[]), unnest(@statuses::smallint[]),
       unnest(@levels::smallint[]), unnest(@categories::text[]), unnest(@whats::text[]),
       unnest(@tasks::bigint[]), unnest(@messages::bigint[])
ON CONFLICT (corpus_id, service_id, status, level, category, what) DO UPDATE
SET tasks = r.tasks + excluded.tasks, messages = r.messages + excluded.messages;

-- name: ReportRollupDropZero :exec
-- ReportRollupDropZero drops the rows of the keys given (the ones a fold took from) that count
-- nothing now.
DELETE FROM report_rollup r
USING (SELECT unnest(@corpus_ids::int[]) AS corpus_id, unnest(@service_ids::int[]) AS service_id,
              unnest(@statuses::smallint[]) AS status, unnest(@levels::smallint[]) AS level,
              unnest(@categories::text[]) AS category, unnest(@whats::text[]) AS what) AS k
WHERE r.corpus_id = k.corpus_id AND r.service_id = k.service_id AND r.status = k.status
  AND r.level = k.level AND r.category = k.category AND r.what = k.what
  AND r.tasks = 0 AND r.messages = 0;

-- name: ReportAllRollupDropZero :exec
-- ReportAllRollupDropZero is ReportRollupDropZero for report_all_rollup.
DELETE FROM report_all_rollup r
USING (SELECT unnest(@corpus_ids::int[]) AS corpus_id, unnest(@service_ids::int[]) AS service_id,
              unnest(@severities::text[]) AS severity, unnest(@levels::smallint[]) AS level,
              unnest(@categories::text[]) AS category, unnest(@whats::text[]) AS what) AS k
WHERE r.corpus_id = k.corpus_id AND r.service_id = k.service_id AND r.severity = k.severity
  AND r.level = k.level AND r.category = k.category AND r.what = k.what
  AND r.tasks = 0 AND r.messages = 0;

-- name: ReportAllRollupAdd :exec
-- ReportAllRollupAdd adds a fold's changes to report_all_rollup, as ReportRollupAdd.
INSERT INTO report_all_rollup AS r (corpus_id, service_id, severity, level, category, what, tasks, messages)
SELECT unnest(@corpus_ids::int[]), unnest(@service_ids::int[]), unnest(@severities::text[]),
       unnest(@levels::smallint[]), unnest(@categories::text[]), unnest(@whats::text[]),
       unnest(@tasks::bigint[]), unnest(@messages::bigint[])
ON CONFLICT (corpus_id, service_id, level, severity, category, what) DO UPDATE
SET tasks = r.tasks + excluded.tasks, messages = r.messages + excluded.messages;

-- name: ReportFoldSettings :exec
-- ReportFoldSettings sets the fold's transaction up: JIT off (the planner's estimates of the
-- fold's unnested arrays are far too high, and compiling the plan took 1.6 s of a 2 s fold of
-- 5,000 tasks) and sequential scans on (a replica's sessions turn them off, and report_changes
-- has no index: the planner, pricing every plan as one, chose a nested loop that took 3.7 s).
SELECT set_config('jit', 'off', true), set_config('enable_seqscan', 'on', true);

-- name: ReportFoldLock :one
-- ReportFoldLock takes the fold's lock for the transaction, if no other fold holds it.
SELECT pg_try_advisory_xact_lock(hashtext('cortexq report fold'))::bool AS locked;

-- name: ReportFoldDone :exec
-- ReportFoldDone records the fold's time.
UPDATE report_fold_state SET folded_at = now();

-- name: ReportFoldState :one
-- ReportFoldState says when the rollups were last folded (NULL: never) and how many changes
-- wait for the next fold; on a hot standby (standby), also how long ago the last transaction it
-- replayed committed on the primary (replay_age_seconds, by the standby's clock; -1: none
-- replayed since it started).
SELECT s.folded_at, (SELECT count(*) FROM report_changes)::bigint AS pending,
       pg_is_in_recovery()::bool AS standby,
       coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), -1)::float8 AS replay_age_seconds
FROM report_fold_state s;

-- name: ReportChangesAdd :exec
-- ReportChangesAdd notes tasks whose status, run or messages changed, for the next fold.
INSERT INTO report_changes (task_id) SELECT unnest(@task_ids::bigint[]);

-- name: ReportKindTasks :one
-- ReportKindTasks gives the message_kinds id of a (severity, category, what) (0: none) and the
-- tasks of a corpus and service having it as of the last fold: those of a status (@status
-- NULL: of every status, from the all-tasks rollup). The messages level picks its way to the
-- tasks by that count (ReportKindTasksFew or ReportKindTasksWalk).
SELECT coalesce((SELECT k.id FROM message_kinds k
                 WHERE k.severity = @severity AND k.category = @category AND k.what = @what), 0)::int AS kind,
       coalesce(CASE WHEN sqlc.narg('status')::smallint IS NULL THEN
                    (SELECT a.tasks FROM report_all_rollup a
                     WHERE a.corpus_id = @corpus_id AND a.service_id = @service_id AND a.severity = @severity
                       AND a.level = rollup_what() AND a.category = @category AND a.what = @what)
                ELSE
                    (SELECT r.tasks FROM report_rollup r
                     WHERE r.corpus_id = @corpus_id AND r.service_id = @service_id AND r.status = sqlc.narg('status')::smallint
                       AND r.level = rollup_what() AND r.category = @category AND r.what = @what)
                END, 0)::bigint AS tasks;

-- name: ReportKindTasksFew :many
-- ReportKindTasksFew lists the tasks of a corpus and service (of a status; NULL: any) having a
-- kind of message as of the last fold, by id, with their messages of it (n) and those of the
-- tasks up to each (upto): those past @off messages, at most @lim tasks. For a kind of few tasks:
-- the GIN index on report_folded.kinds finds them all, then they are sorted.
WITH few AS (
    SELECT f.task_id, f.counts[array_position(f.kinds, @kind::int)] AS n
    FROM report_folded f
    WHERE f.kinds @> ARRAY[@kind::int] AND f.corpus_id = @corpus_id AND f.service_id = @service_id
      AND (sqlc.narg('status')::smallint IS NULL OR f.status = sqlc.narg('status')::smallint)
    OFFSET 0
), cum AS (
    SELECT task_id, n, sum(n) OVER (ORDER BY task_id) AS upto
    FROM few
)
SELECT task_id, n::int AS n, upto::bigint AS upto
FROM cum
WHERE upto > @off::bigint
ORDER BY task_id
LIMIT @lim;

-- name: ReportKindTasksWalk :many
-- ReportKindTasksWalk is ReportKindTasksFew for a kind of many tasks: it walks the corpus and
-- service's folded tasks in id order (report_folded_scope; = ANY keeps the GIN index out) and
-- stops at the page's last task, reading about @lim over the kind's share of them.
WITH walk AS (
    SELECT f.task_id, f.counts[array_position(f.kinds, @kind::int)] AS n
    FROM report_folded f
    WHERE f.corpus_id = @corpus_id AND f.service_id = @service_id AND @kind::int = ANY (f.kinds)
      AND (sqlc.narg('status')::smallint IS NULL OR f.status = sqlc.narg('status')::smallint)
    ORDER BY f.corpus_id, f.service_id, f.task_id
), cum AS (
    SELECT task_id, n, sum(n) OVER (ORDER BY task_id) AS upto
    FROM walk
)
SELECT task_id, n::int AS n, upto::bigint AS upto
FROM cum
WHERE upto > @off::bigint
LIMIT @lim;

-- name: ReportKindWalkSettings :exec
-- ReportKindWalkSettings sets a walk's transaction up: no parallel plan (the walk stops after a
-- few hundred rows; at 1,000,000 tasks a parallel one waited about half a second for its workers,
-- 960 ms against 200 at load 12).
SELECT set_config('max_parallel_workers_per_gather', '0', true);

-- name: ReportKindMessages :many
-- ReportKindMessages reads a page of the messages of one kind from the current runs' logs of
-- some tasks: of each task, the messages of the kind from its @skips-th on, @takes of them, in
-- log order; tasks by id, and only those of the status (NULL: any). A log is read once a task:
-- the positions of the kind in it (array_positions) are sliced to the page's, and the details to
-- the span of those (a page of a task with a million messages reads its arrays once, not once
-- a message); a NULL detail is the kind's usual one (migrations/00025_usual_details.sql).
WITH picked AS (
    SELECT unnest(@task_ids::bigint[]) AS task_id, unnest(@skips::int[]) AS skip, unnest(@takes::int[]) AS take
)
SELECT t.id, t.entry, t.status,
       (CASE WHEN m.details IS NULL THEN ''
             ELSE coalesce(d.details[u.p - ps.pos[1] + 1], usual.details, '') END)::text AS details
FROM picked p
CROSS JOIN (SELECT (SELECT k.usual_details FROM message_kinds k WHERE k.id = @kind::int) AS details) usual
CROSS JOIN LATERAL (SELECT x.id, x.entry, x.status, x.run FROM tasks x WHERE x.id = p.task_id LIMIT 1) t
JOIN task_message_logs m ON m.task_id = t.id AND m.run = t.run
CROSS JOIN LATERAL (SELECT (array_positions(m.kinds, @kind::int))[p.skip + 1 : p.skip + p.take] AS pos OFFSET 0) ps
CROSS JOIN LATERAL (SELECT m.details[ps.pos[1] : ps.pos[cardinality(ps.pos)]] AS details OFFSET 0) d
CROSS JOIN LATERAL unnest(ps.pos) AS u (p)
WHERE sqlc.narg('status')::smallint IS NULL OR t.status = sqlc.narg('status')::smallint
ORDER BY t.id, u.p;

-- name: ReportNoMessages :many
-- ReportNoMessages lists the tasks with a status and no message of a severity in their current
-- run, by id.
SELECT t.id, t.entry
FROM tasks t
WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id AND t.status = @status
  AND NOT EXISTS (SELECT 1 FROM task_message_logs m
                  WHERE m.task_id = t.id AND m.run = t.run
                    AND m.kinds && ARRAY(SELECT k.id FROM message_kinds k WHERE k.severity = @severity))
ORDER BY t.id
LIMIT @lim OFFSET @off;

-- name: RunList :many
-- RunList lists the runs of a corpus and service, oldest first.
SELECT id, started_at, ended_at, note, owner, tasks, todo, no_problem, warning, error, fatal, invalid,
       blocked
FROM runs
WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int
ORDER BY id;

-- name: RunLockOpen :one
-- RunLockOpen takes the open run of a corpus and service.
SELECT id
FROM runs
WHERE corpus_id = @corpus_id::int AND service_id = @service_id::int AND ended_at IS NULL
ORDER BY id DESC
LIMIT 1
FOR UPDATE;

-- name: RunOpenReturning :one
INSERT INTO runs (corpus_id, service_id, started_at, note)
VALUES (@corpus_id::int, @service_id::int, @started_at::timestamptz, @note)
RETURNING id;

-- name: RunClose :exec
-- RunClose closes a run with the tallies it ended with.
UPDATE runs
SET ended_at = @ended_at::timestamptz, scope = @scope::jsonb, tasks = @tasks, todo = @todo,
    no_problem = @no_problem, warning = @warning, error = @error, fatal = @fatal,
    invalid = @invalid, blocked = @blocked
WHERE id = @id;

-- name: RunSnapshot :execrows
-- RunSnapshot records the statuses of the tasks of a corpus and service as a run's final ones.
INSERT INTO run_statuses (run_id, task_id, status)
SELECT @run_id::bigint, id, status
FROM tasks
WHERE corpus_id = @corpus_id AND service_id = @service_id;

-- name: DiffMatrixCurrent :many
-- DiffMatrixCurrent counts the tasks of a corpus and service by their status in a closed run
-- (NULL: not a task then) and their current status.
SELECT f.status AS from_status, t.status AS to_status, count(*)::bigint AS tasks
FROM tasks t
LEFT JOIN run_statuses f ON f.run_id = @from_run AND f.task_id = t.id
WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id
GROUP BY 1, 2
ORDER BY 1 DESC NULLS FIRST, 2 DESC;

-- name: DiffMatrixClosed :many
-- DiffMatrixClosed counts the tasks of a closed run by their status in an earlier closed run
-- (NULL: not a task then) and their status in it.
SELECT f.status AS from_status, r.status AS to_status, count(*)::bigint AS tasks
FROM run_statuses r
LEFT JOIN run_statuses f ON f.run_id = @from_run AND f.task_id = r.task_id
WHERE r.run_id = @to_run
GROUP BY 1, 2
ORDER BY 1 DESC NULLS FIRST, 2 DESC;

-- name: DiffCellCurrent :many
-- DiffCellCurrent lists the tasks of one cell of DiffMatrixCurrent, by id.
SELECT t.id, t.entry
FROM tasks t
LEFT JOIN run_statuses f ON f.run_id = @from_run AND f.task_id = t.id
WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id AND t.status = @to_status
  AND f.status IS NOT DISTINCT FROM sqlc.narg('from_status')::smallint
ORDER BY t.id
LIMIT @lim OFFSET @off;

-- name: DiffCellClosed :many
-- DiffCellClosed lists the tasks of one cell of DiffMatrixClosed, by id.
SELECT r.task_id AS id, coalesce(t.entry, '')::text AS entry
FROM run_statuses r
LEFT JOIN run_statuses f ON f.run_id = @from_run AND f.task_id = r.task_id
LEFT JOIN tasks t ON t.id = r.task_id
WHERE r.run_id = @to_run AND r.status = @to_status
  AND f.status IS NOT DISTINCT FROM sqlc.narg('from_status')::smallint
ORDER BY r.task_id
LIMIT @lim OFFSET @off;

-- name: SandboxCreate :one
-- SandboxCreate makes a sandbox of a corpus: a corpus of the same path with it as parent.
INSERT INTO corpora (name, path, parent_corpus_id)
SELECT @name::text, p.path, p.id
FROM corpora p
WHERE p.id = @parent_id
RETURNING id;

-- name: SandboxCopyTasks :execrows
-- SandboxCopyTasks copies the selected tasks of a corpus and service (the selection of
-- TaskRerun) into a sandbox as TODO tasks of its first run.
INSERT INTO tasks (service_id, corpus_id, entry, source_size, source_mtime)
SELECT s.service_id, @sandbox_id::int, s.entry, s.source_size, s.source_mtime
FROM tasks s
WHERE s.corpus_id = @corpus_id AND s.service_id = @service_id
  AND (sqlc.narg('statuses')::smallint[] IS NULL OR s.status = ANY(sqlc.narg('statuses')::smallint[]))
  AND (@no_messages::bool AND NOT EXISTS (
           SELECT 1 FROM task_message_logs m
           WHERE m.task_id = s.id AND m.run = s.run
             AND m.kinds && ARRAY(SELECT k.id FROM message_kinds k WHERE k.severity = sqlc.narg('severity')::text))
       OR NOT @no_messages::bool AND sqlc.narg('severity')::text IS NULL
       AND sqlc.narg('category')::text IS NULL AND sqlc.narg('what')::text IS NULL
       OR NOT @no_messages::bool AND EXISTS (
           SELECT 1 FROM task_message_logs m
           WHERE m.task_id = s.id AND m.run = s.run
             AND m.kinds && ARRAY(SELECT k.id FROM message_kinds k
                                  WHERE (sqlc.narg('severity')::text IS NULL OR k.severity = sqlc.narg('severity')::text)
                                    AND (sqlc.narg('category')::text IS NULL OR k.category = sqlc.narg('category')::text)
                                    AND (sqlc.narg('what')::text IS NULL OR k.what = sqlc.narg('what')::text))))
ORDER BY s.id;

-- name: SandboxList :many
-- SandboxList lists the sandboxes with their parents and tasks.
SELECT c.id, c.name, p.name AS parent, c.created_at,
       (SELECT count(*) FROM tasks t WHERE t.corpus_id = c.id)::bigint AS tasks
FROM corpora c
JOIN corpora p ON p.id = c.parent_corpus_id
ORDER BY c.id;

-- name: SandboxLock :one
-- SandboxLock takes a sandbox's corpus row, with its path and the id its result archives are
-- named after.
SELECT id, path, coalesce(archive_id, id)::int AS archive_id
FROM corpora
WHERE name = @name AND parent_corpus_id IS NOT NULL
FOR UPDATE;

-- name: SandboxDeleteTasks :many
-- SandboxDeleteTasks deletes a sandbox's tasks (their dispatch rows, attempts and messages go
-- with them, trigger tasks_deleted), returning each one's id, entry and service name.
WITH gone AS (
    DELETE FROM tasks WHERE corpus_id = @corpus_id RETURNING id, entry, service_id
)
SELECT g.id, g.entry, s.name AS service
FROM gone g
JOIN services s ON s.id = g.service_id;

-- name: SandboxDeleteRuns :exec
-- SandboxDeleteRuns deletes the runs of a corpus and their statuses.
WITH gone AS (
    DELETE FROM runs WHERE corpus_id = @corpus_id::int RETURNING id
)
DELETE FROM run_statuses r USING gone WHERE r.run_id = gone.id;

-- name: SandboxDeleteCorpus :exec
DELETE FROM corpora WHERE id = @id;

-- The stored diff matrices of migrations/00012_diff_matrices.sql: run_diffs (two closed runs,
-- counted on first use) and diff_current (the last closed run and the open one, kept by the
-- report fold).

-- name: DiffClosedStored :many
-- DiffClosedStored reads the stored matrix of two closed runs (no rows: not counted yet).
SELECT from_status, to_status, tasks
FROM run_diffs
WHERE from_run = @from_run AND to_run = @to_run
ORDER BY from_status DESC NULLS FIRST, to_status DESC;

-- name: DiffClosedStore :exec
-- DiffClosedStore keeps the matrix of two closed runs, a from status of -128 standing for NULL
-- (a concurrent first use may have kept it already: the same counts, as closed runs never
-- change).
INSERT INTO run_diffs (corpus_id, service_id, from_run, to_run, from_status, to_status, tasks)
SELECT @corpus_id::int, @service_id::int, @from_run::bigint, @to_run::bigint, nullif(k.from_status, -128), k.to_status, k.tasks
FROM (SELECT unnest(@from_statuses::smallint[]) AS from_status, unnest(@to_statuses::smallint[]) AS to_status,
             unnest(@tasks::bigint[]) AS tasks) AS k
ON CONFLICT ON CONSTRAINT run_diffs_cell DO NOTHING;

-- name: DiffCurrentStored :many
-- DiffCurrentStored reads the kept matrix of a closed run and the open one of a corpus and
-- service, if the kept one compares that closed run (no rows: it does not, or not yet).
SELECT d.from_status, d.to_status, d.tasks, s.swept_at
FROM diff_current_state s
JOIN diff_current d ON d.corpus_id = s.corpus_id AND d.service_id = s.service_id
WHERE s.corpus_id = @corpus_id AND s.service_id = @service_id AND s.from_run = @from_run AND d.tasks > 0
  AND EXISTS (SELECT 1 FROM runs o WHERE o.id = s.to_run AND o.ended_at IS NULL)
ORDER BY d.from_status DESC NULLS FIRST, d.to_status DESC;

-- name: DiffScopes :many
-- DiffScopes lists the corpora and services with an open run after a closed one: the pairs
-- diff_current keeps, with what it keeps now (gen 0: nothing) and whether a sweep is due.
SELECT o.corpus_id::int AS corpus_id, o.service_id::int AS service_id, o.id AS to_run, p.id AS from_run,
       coalesce(s.from_run, 0)::bigint AS kept_from_run, coalesce(s.to_run, 0)::bigint AS kept_to_run,
       coalesce(s.gen, 0)::bigint AS gen, coalesce(s.next_sweep_at <= now(), true)::bool AS due
FROM runs o
CROSS JOIN LATERAL (SELECT r.id FROM runs r
                    WHERE r.corpus_id = o.corpus_id AND r.service_id = o.service_id AND r.id < o.id
                    ORDER BY r.id DESC
                    LIMIT 1) p
JOIN runs pr ON pr.id = p.id AND pr.ended_at IS NOT NULL
LEFT JOIN diff_current_state s ON s.corpus_id = o.corpus_id AND s.service_id = o.service_id
WHERE o.ended_at IS NULL AND o.corpus_id IS NOT NULL AND o.service_id IS NOT NULL
ORDER BY o.corpus_id, o.service_id;

-- name: DiffResetClear :exec
-- DiffResetClear empties a corpus and service's kept matrix before DiffResetCount.
DELETE FROM diff_current WHERE corpus_id = @corpus_id AND service_id = @service_id;

-- name: DiffResetCount :one
-- DiffResetCount counts afresh the matrix of a closed run and the open one of a corpus and
-- service, under a new generation: every task's cell, and a diff_touched row for each task
-- whose cell is not its closed-run status twice. One statement, one snapshot: a change committed
-- after it began is noted for the next fold, which recounts that task.
WITH cells AS MATERIALIZED (
    SELECT t.id, f.status AS from_status, t.status AS to_status
    FROM tasks t
    LEFT JOIN run_statuses f ON f.run_id = @from_run AND f.task_id = t.id
    WHERE t.corpus_id = @corpus_id AND t.service_id = @service_id
), gen AS (
    SELECT nextval('diff_gen') AS gen
), touched AS (
    INSERT INTO diff_touched AS d (task_id, corpus_id, service_id, gen, from_status, to_status)
    SELECT c.id, @corpus_id, @service_id, (SELECT gen FROM gen), c.from_status, c.to_status
    FROM cells c
    WHERE c.from_status IS DISTINCT FROM c.to_status
    ON CONFLICT (task_id) DO UPDATE
    SET corpus_id = excluded.corpus_id, service_id = excluded.service_id, gen = excluded.gen,
        from_status = excluded.from_status, to_status = excluded.to_status
), counted AS (
    INSERT INTO diff_current (corpus_id, service_id, from_status, to_status, tasks)
    SELECT @corpus_id, @service_id, from_status, to_status, count(*)
    FROM cells
    GROUP BY from_status, to_status
), state AS (
    INSERT INTO diff_current_state AS s (corpus_id, service_id, from_run, to_run, gen, counted_at, swept_at, next_sweep_at)
    VALUES (@corpus_id, @service_id, @from_run, @to_run, (SELECT gen FROM gen), now(), now(), now())
    ON CONFLICT (corpus_id, service_id) DO UPDATE
    SET from_run = excluded.from_run, to_run = excluded.to_run, gen = excluded.gen,
        counted_at = excluded.counted_at, swept_at = excluded.swept_at
)
SELECT (SELECT count(*) FROM cells)::bigint AS tasks;

-- name: DiffSweepTasks :many
-- DiffSweepTasks lists the tasks of a corpus and service whose status is not final (TODO, in
-- flight, blocked): leases, expiries and pauses change those without a note for the fold.
SELECT id
FROM tasks
WHERE corpus_id = @corpus_id AND service_id = @service_id AND status IN (0, 1, -6);

-- name: DiffSwept :exec
-- DiffSwept records a sweep (or reset) of a corpus and service's kept matrix and when the next
-- may be.
UPDATE diff_current_state
SET swept_at = now(), next_sweep_at = now() + make_interval(secs => @pause_seconds::float8)
WHERE corpus_id = @corpus_id AND service_id = @service_id;

-- name: DiffFold :one
-- DiffFold recounts some tasks in the kept matrices: for each task, what it is counted as (its
-- diff_touched row of the generation, else its closed-run status twice, for a task of that run)
-- is subtracted and what it is now added (nothing for a deleted task), and its diff_touched row
-- says so. One snapshot; the caller holds the fold's lock. A task of a corpus and service with
-- no kept matrix is skipped.
WITH ids AS (
    SELECT DISTINCT unnest(@task_ids::bigint[]) AS id
), cur AS (
    -- One primary-key probe per id (as ReportFold's cur).
    SELECT t.id, s.corpus_id, s.service_id, s.from_run, s.gen, t.status
    FROM ids
    CROSS JOIN LATERAL (SELECT x.id, x.corpus_id, x.service_id, x.status
                        FROM tasks x
                        WHERE x.id = ids.id
                        LIMIT 1) t
    JOIN diff_current_state s ON s.corpus_id = t.corpus_id AND s.service_id = t.service_id
), gone AS (
    -- Deleted tasks, in whichever kept matrix counts them.
    SELECT ids.id, s.corpus_id, s.service_id, s.from_run, s.gen, NULL::smallint AS status
    FROM ids
    CROSS JOIN diff_current_state s
    WHERE NOT EXISTS (SELECT 1 FROM tasks x WHERE x.id = ids.id)
), keys AS (
    SELECT * FROM cur
    UNION ALL
    SELECT * FROM gone
), cells AS (
    -- The cell each task is counted in (old_to NULL: none) and the one it is in now (new_to
    -- NULL: none, a deleted task); the row of diff_touched is written only when they differ.
    SELECT k.id, k.corpus_id, k.service_id, k.gen, f.status AS from_status,
           CASE WHEN d.task_id IS NOT NULL THEN d.to_status WHEN f.task_id IS NOT NULL THEN f.status END AS old_to,
           k.status AS new_to
    FROM keys k
    LEFT JOIN run_statuses f ON f.run_id = k.from_run AND f.task_id = k.id
    LEFT JOIN diff_touched d ON d.task_id = k.id AND d.gen = k.gen
), changed AS (
    SELECT * FROM cells WHERE old_to IS DISTINCT FROM new_to
), put AS (
    INSERT INTO diff_touched AS d (task_id, corpus_id, service_id, gen, from_status, to_status)
    SELECT id, corpus_id, service_id, gen, from_status, new_to FROM changed
    ON CONFLICT (task_id) DO UPDATE
    SET corpus_id = excluded.corpus_id, service_id = excluded.service_id, gen = excluded.gen,
        from_status = excluded.from_status, to_status = excluded.to_status
), delta AS (
    SELECT corpus_id, service_id, from_status, old_to AS to_status, -1 AS n FROM changed WHERE old_to IS NOT NULL
    UNION ALL
    SELECT corpus_id, service_id, from_status, new_to, 1 FROM changed WHERE new_to IS NOT NULL
), moved AS (
    INSERT INTO diff_current AS m (corpus_id, service_id, from_status, to_status, tasks)
    SELECT corpus_id, service_id, from_status, to_status, sum(n)
    FROM delta
    GROUP BY corpus_id, service_id, from_status, to_status
    HAVING sum(n) <> 0
    ORDER BY corpus_id, service_id, from_status, to_status
    ON CONFLICT ON CONSTRAINT diff_current_cell DO UPDATE SET tasks = m.tasks + excluded.tasks
    RETURNING 1
)
SELECT (SELECT count(*) FROM cur)::bigint AS tasks, (SELECT count(*) FROM moved)::bigint AS cells;

-- name: DiffDeleteCorpus :exec
-- DiffDeleteCorpus deletes the diff matrices of a corpus's runs (sandbox delete; its
-- diff_touched rows are void with their generation, and DiffFold overwrites them).
WITH diffs AS (
    DELETE FROM run_diffs WHERE run_diffs.corpus_id = @corpus_id::int
), kept AS (
    DELETE FROM diff_current WHERE diff_current.corpus_id = @corpus_id::int
)
DELETE FROM diff_current_state WHERE diff_current_state.corpus_id = @corpus_id::int;

-- name: DiffKeptCell :one
-- DiffKeptCell gives the generation of the kept matrix of a closed run and the open one of a
-- corpus and service (no row: not kept) and the tasks of one of its cells (from -128: new).
SELECT s.gen, coalesce((SELECT d.tasks FROM diff_current d
                        WHERE d.corpus_id = s.corpus_id AND d.service_id = s.service_id
                          AND coalesce(d.from_status, -128) = @from_key::smallint AND d.to_status = @to_status), 0)::bigint AS tasks
FROM diff_current_state s
WHERE s.corpus_id = @corpus_id AND s.service_id = @service_id AND s.from_run = @from_run
  AND EXISTS (SELECT 1 FROM runs o WHERE o.id = s.to_run AND o.ended_at IS NULL);

-- name: DiffCellKept :many
-- DiffCellKept lists a page of one cell of the kept matrix whose from status (-128: new) is not
-- its to status, by id: the tasks counted in it at the last fold that are still in it.
-- The tasks are probed by primary key in the index's order (LIMIT 1 keeps the planner from a
-- hash join that reads every task of the status: 1.4 s for a page at full scale).
SELECT d.task_id AS id, t.entry
FROM diff_touched d
CROSS JOIN LATERAL (SELECT x.entry, x.status FROM tasks x WHERE x.id = d.task_id LIMIT 1) t
WHERE d.gen = @gen AND d.to_status = @to_status::smallint AND coalesce(d.from_status, -128) = @from_key::smallint
  AND t.status = @to_status::smallint
ORDER BY d.task_id
LIMIT @lim OFFSET @off;

-- name: DiffCellSame :many
-- DiffCellSame lists a page of the tasks of a corpus and service whose status is the same in a
-- closed run and now, by id, walking the run's statuses in order.
-- The tasks are probed by primary key in the run's order, as DiffCellKept's.
SELECT f.task_id AS id, t.entry
FROM run_statuses f
CROSS JOIN LATERAL (SELECT x.entry, x.status, x.corpus_id, x.service_id FROM tasks x WHERE x.id = f.task_id LIMIT 1) t
WHERE f.run_id = @from_run AND f.status = @status::smallint AND t.status = @status::smallint
  AND t.corpus_id = @corpus_id::int AND t.service_id = @service_id::int
ORDER BY f.task_id
LIMIT @lim OFFSET @off;

-- name: DiffClosedCell :one
-- DiffClosedCell gives the tasks of one cell of the kept matrix of two closed runs (from -128:
-- new) and whether the pair is kept at all.
SELECT count(*) > 0 AS kept,
       coalesce(sum(tasks) FILTER (WHERE coalesce(from_status, -128) = @from_key::smallint AND to_status = @to_status), 0)::bigint AS tasks
FROM run_diffs
WHERE from_run = @from_run AND to_run = @to_run;

-- name: DiffKeptAny :one
-- DiffKeptAny says whether any diff matrix is kept (DiffFold has work).
SELECT EXISTS (SELECT 1 FROM diff_current_state)::bool AS kept;

-- name: ReportAllSeverities :many
-- ReportAllSeverities counts, per severity, the tasks of a corpus and service with a message of
-- it in their current run, whatever their status, and those messages (the report's "all tasks",
-- CorTeX's all=true), as of the last fold (report_all_rollup).
SELECT severity, tasks, messages
FROM report_all_rollup
WHERE corpus_id = @corpus_id AND service_id = @service_id AND level = rollup_messaged() AND tasks > 0;

-- name: ReportAllNames :many
-- ReportAllNames lists the categories of a severity (@category NULL) or the whats of one of its
-- categories, with the tasks of any status having one in their current run and the messages, as
-- of the last fold (report_all_rollup). Page of a sorted list (most tasks first), with its
-- length.
SELECT (CASE WHEN sqlc.narg('category')::text IS NULL THEN r.category ELSE r.what END)::text AS name,
       r.tasks, r.messages, count(*) OVER ()::bigint AS total
FROM report_all_rollup r
WHERE r.corpus_id = @corpus_id AND r.service_id = @service_id AND r.severity = @severity AND r.tasks > 0
  AND (sqlc.narg('category')::text IS NULL AND r.level = rollup_category()
       OR r.level = rollup_what() AND r.category = sqlc.narg('category')::text)
ORDER BY r.tasks DESC, r.messages DESC, name
LIMIT @lim OFFSET @off;

-- name: ReportStatusMessages :many
-- ReportStatusMessages is each final status's messages of its own severity in the current runs
-- of its tasks, as of the last fold (the report's first level). The final statuses are named
-- (the rollups hold no other): the primary key's descents then find the five rows; without
-- status the planner scanned the whole table (340 ms at 1,000,000 tasks, docs/api.md#speed).
SELECT status, messages
FROM report_rollup
WHERE corpus_id = @corpus_id AND service_id = @service_id AND status = ANY ('{-1,-2,-3,-4,-5}'::smallint[])
  AND level = 0 AND category = '' AND what = '';
