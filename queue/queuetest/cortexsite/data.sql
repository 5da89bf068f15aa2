-- A CorTeX site's rows of every kind an import reads, for schema.sql. @ROOT@ stands for
-- the directory of the corpora. Corpus arxiv (id 1) has 40 documents, d0 .. d39; its
-- tex_to_html task of document n has the status of n mod 10: 0 and 1 TODO, 2 leased, 3 and 9
-- NoProblem, 4 Warning, 5 Error, 6 Fatal, 7 Invalid, 8 blocked. Sandbox arxiv-errors (id 2)
-- reruns the Errors; corpus zbMATH (id 3) has 5 documents, all Warning.

INSERT INTO services (name, version, inputformat, outputformat, complex, description, lease_timeout_seconds)
VALUES ('tex_to_html', 0.1, 'tex', 'html', true, 'LaTeXML', 600),
       ('echo', 1.0, 'tex', 'tex', false, 'a test service', NULL);

INSERT INTO corpora (path, name, complex, description, parent_corpus_id, selection)
VALUES ('@ROOT@/arxiv/', 'arXiv', true, 'the arXiv', NULL, NULL),
       ('@ROOT@/arxiv', 'arXiv-errors', true, 'the errors again', 1, '{"severity": "error"}'),
       ('@ROOT@/zbl', 'zbMATH', false, '', NULL, NULL);

-- Entries: the import service's tasks (a few with the trailing newline CorTeX may keep).
INSERT INTO tasks (service_id, corpus_id, status, entry)
SELECT 2, 1, -1, '@ROOT@/arxiv/d' || n || '/d' || n || '.zip' || CASE WHEN n % 7 = 0 THEN E'\n' ELSE '' END
FROM generate_series(0, 39) n;
INSERT INTO tasks (service_id, corpus_id, status, entry)
SELECT 2, 3, -1, '@ROOT@/zbl/z' || n || '/z' || n || '.zip' FROM generate_series(0, 4) n;

INSERT INTO tasks (service_id, corpus_id, status, entry)
SELECT 3, 1, (ARRAY[0, 0, 4711, -1, -2, -3, -4, -5, -6, -1])[n % 10 + 1],
       '@ROOT@/arxiv/d' || n || '/d' || n || '.zip' || CASE WHEN n % 7 = 0 THEN E'\n' ELSE '' END
FROM generate_series(0, 39) n;
INSERT INTO tasks (service_id, corpus_id, status, entry)
SELECT 4, 1, -1, '@ROOT@/arxiv/d' || n || '/d' || n || '.zip' FROM generate_series(0, 9) n;
INSERT INTO tasks (service_id, corpus_id, status, entry)
SELECT 3, 2, CASE WHEN n < 20 THEN -1 ELSE -3 END, '@ROOT@/arxiv/d' || n || '/d' || n || '.zip'
FROM generate_series(5, 35, 10) n;
INSERT INTO tasks (service_id, corpus_id, status, entry)
SELECT 3, 3, -2, '@ROOT@/zbl/z' || n || '/z' || n || '.zip' FROM generate_series(0, 4) n;

-- Messages of every severity; NULL category and what on some.
INSERT INTO log_infos (task_id, category, what, details)
SELECT id, 'cortex', 'runtime_ms', (id * 10)::text FROM tasks WHERE service_id > 2 AND status BETWEEN -4 AND -1;
INSERT INTO log_infos (task_id, category, what, details)
SELECT id, 'latexml', 'conversion', 'complete' FROM tasks WHERE service_id > 2 AND status = -1;
INSERT INTO log_warnings (task_id, category, what, details)
SELECT id, 'undefined_macro', '\foo', 'line ' || id FROM tasks WHERE service_id > 2 AND status BETWEEN -4 AND -2;
INSERT INTO log_warnings (task_id, category, what, details)
SELECT id, NULL, NULL, NULL FROM tasks WHERE service_id = 3 AND status = -2 AND id % 2 = 0;
INSERT INTO log_errors (task_id, category, what, details)
SELECT id, 'undefined', '\bar', 'at ' || id FROM tasks WHERE service_id > 2 AND status IN (-3, -4);
INSERT INTO log_errors (task_id, category, what, details)
SELECT id, 'missing_file', 'amsart.cls', NULL FROM tasks WHERE service_id = 3 AND status = -3;
INSERT INTO log_fatals (task_id, category, what, details)
SELECT id, 'fatal', 'timeout', NULL FROM tasks WHERE service_id > 2 AND status = -4;
INSERT INTO log_invalids (task_id, category, what, details)
SELECT id, 'invalid', 'no_tex', 'no .tex file' FROM tasks WHERE service_id > 2 AND status = -5;
-- Left over on a task not finished: not carried.
INSERT INTO log_errors (task_id, category, what, details)
SELECT id, 'stale', 'left_over', '' FROM tasks WHERE service_id = 3 AND corpus_id = 1 AND status = 0 LIMIT 1;

INSERT INTO task_runtimes (task_id, service_id, runtime_ms)
SELECT id, service_id, id * 10 FROM tasks WHERE service_id > 2 AND status BETWEEN -4 AND -1;

-- Three runs of arXiv × tex_to_html (two closed, each snapshotted as it closed; the current one
-- with a snapshot taken by hand, which has no place in cortexq), one closed and the current of
-- arXiv × echo, and the current runs of the rest.
INSERT INTO historical_runs (service_id, corpus_id, total, invalid, fatal, error, warning, no_problem,
                             in_progress, start_time, end_time, owner, description)
VALUES (3, 1, 40, 0, 14, 13, 0, 13, 0, '2025-01-01 08:00', '2025-01-05 00:00', 'alice', 'first run'),
       (3, 1, 40, 0, 0, 20, 10, 10, 0, '2025-02-01 08:00', '2025-02-03 00:00', 'bob', 'new latexml'),
       (4, 1, 10, 0, 0, 0, 0, 10, 0, '2025-02-10 08:00', '2025-02-11 00:00', 'bob', ''),
       (3, 1, 40, 4, 4, 4, 4, 8, 12, '2025-03-01 08:00', NULL, 'carol', 'current'),
       (4, 1, 10, 0, 0, 0, 0, 10, 0, '2025-03-01 09:00', NULL, 'carol', ''),
       (3, 2, 4, 0, 0, 2, 0, 2, 0, '2025-03-05 08:00', NULL, 'dave', 'errors again'),
       (3, 3, 5, 0, 0, 0, 5, 0, 0, '2025-03-06 08:00', NULL, 'erin', '');
INSERT INTO historical_tasks (task_id, status, saved_at)
SELECT id, (ARRAY[-1, -3, -4])[id % 3 + 1], '2025-01-05 00:00:01' FROM tasks WHERE corpus_id = 1 AND service_id = 3;
INSERT INTO historical_tasks (task_id, status, saved_at)
SELECT id, -4, '2025-02-02 12:00:00' FROM tasks WHERE corpus_id = 1 AND service_id = 3;
INSERT INTO historical_tasks (task_id, status, saved_at)
SELECT id, (ARRAY[-1, -2, -3, -3])[id % 4 + 1], '2025-02-03 00:00:01' FROM tasks WHERE corpus_id = 1 AND service_id = 3;
INSERT INTO historical_tasks (task_id, status, saved_at)
SELECT id, CASE WHEN status > 0 THEN 0 ELSE status END, '2025-03-02 00:00:00' FROM tasks WHERE corpus_id = 1 AND service_id = 3;

INSERT INTO worker_metadata (service_id, last_dispatched_task_id, last_returned_task_id, total_dispatched,
                             total_returned, first_seen, session_seen, time_last_dispatch, time_last_return, name)
VALUES (3, 100, 99, 5000, 4990, '2024-12-01 10:00', '2025-03-01 10:00', '2025-03-04 10:00', '2025-03-04 10:01', 'tcp://10.0.0.5:1234/latexml-1'),
       (3, 101, NULL, 20, 0, '2025-03-04 09:00', NULL, '2025-03-04 09:30', NULL, 'latexml-2'),
       (4, 7, 7, 10, 10, '2025-02-10 08:00', NULL, '2025-02-10 09:00', '2025-02-10 09:01', 'echo-1'),
       (2, 1, 1, 45, 45, '2025-01-01 00:00', NULL, '2025-01-01 00:00', '2025-01-01 00:01', 'importer');
