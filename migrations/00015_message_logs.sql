-- Compact messages (docs/performance.md#messages): a task's log of a run is one row, not a row a
-- message. A LaTeXML log carries about a hundred messages, most of them the same few dozen
-- (severity, category, what): one row each cost 273 bytes with its indexes, and the claim spent
-- most of its time writing them.
--
-- message_kinds is the dictionary of (severity, category, what), with a small id; rows are never
-- deleted or changed, so a replica keeps the ids it has seen in memory (queue/lease).
-- task_message_logs holds one row per task and run with messages: kinds, the dictionary ids of
-- its messages in log order, and details, their details in the same order, NULL when every one
-- is empty. Both arrays are compressed (lz4 where the server has it) once a row passes 256 bytes.
-- A task's message number n is the n-th element of both.
--
-- task_messages becomes a view with the old table's columns, one row per message, so that psql
-- queries (`WHERE task_id = 123`) keep answering; its id is the message's position in its task's
-- log of that run (it was a number unique over the table). Rows inserted into the view (an
-- operator's or a test's) are appended to their task's log by an INSTEAD OF trigger.
--
-- Existing messages are converted in place: that reads the whole table and rewrites it, with
-- writes to it held meanwhile (migrate with the replicas stopped).

-- +goose Up
CREATE TABLE message_kinds (
    id       integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    severity text NOT NULL,
    category varchar(100) NOT NULL,
    what     varchar(200) NOT NULL,
    CONSTRAINT message_kinds_key UNIQUE (severity, category, what)
);
COMMENT ON TABLE message_kinds IS 'The (severity, category, what) of log messages, each once; never deleted or changed.';

CREATE TABLE task_message_logs (
    task_id bigint NOT NULL,
    run     integer NOT NULL,
    kinds   integer[] NOT NULL,
    details text[],
    PRIMARY KEY (task_id, run)
) WITH (toast_tuple_target = 256);
COMMENT ON TABLE task_message_logs IS 'One task''s log messages of one run: message_kinds ids and details (NULL: all empty), in log order.';

-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE task_message_logs ALTER COLUMN kinds SET COMPRESSION lz4,
        ALTER COLUMN details SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 not supported by this server: task_message_logs uses pglz';
END
$$;
-- +goose StatementEnd

INSERT INTO message_kinds (severity, category, what)
SELECT DISTINCT severity, category, what FROM task_messages ORDER BY 1, 2, 3;

INSERT INTO task_message_logs (task_id, run, kinds, details)
SELECT m.task_id, m.run, array_agg(k.id ORDER BY m.id),
       CASE WHEN bool_or(m.details <> '') THEN array_agg(m.details::text ORDER BY m.id) END
FROM task_messages m
JOIN message_kinds k ON k.severity = m.severity AND k.category = m.category AND k.what = m.what
GROUP BY m.task_id, m.run;

-- The old table keeps its dependent view (audit_dead_letters) until that is redefined below.
ALTER TABLE task_messages RENAME TO task_messages_00014;

CREATE VIEW task_messages AS
SELECT x.n::bigint AS id,
       l.task_id,
       l.run,
       k.severity,
       k.category,
       k.what,
       coalesce(x.details, '')::varchar(2000) AS details
FROM task_message_logs l
CROSS JOIN LATERAL unnest(l.kinds, l.details) WITH ORDINALITY AS x (kind, details, n)
JOIN message_kinds k ON k.id = x.kind;
COMMENT ON VIEW task_messages IS 'One row per log message (task_message_logs with message_kinds); id is its position in its task''s log of that run.';

-- +goose StatementBegin
CREATE FUNCTION task_messages_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kind integer;
    pos bigint;
BEGIN
    INSERT INTO message_kinds (severity, category, what)
    VALUES (NEW.severity, NEW.category, NEW.what)
    ON CONFLICT ON CONSTRAINT message_kinds_key DO NOTHING;
    SELECT k.id INTO kind FROM message_kinds k
    WHERE k.severity = NEW.severity AND k.category = NEW.category AND k.what = NEW.what;
    INSERT INTO task_message_logs AS l (task_id, run, kinds, details)
    VALUES (NEW.task_id, NEW.run, ARRAY[kind], CASE WHEN coalesce(NEW.details, '') <> '' THEN ARRAY[NEW.details::text] END)
    ON CONFLICT (task_id, run) DO UPDATE
    SET kinds = l.kinds || excluded.kinds,
        details = CASE WHEN l.details IS NULL AND excluded.details IS NULL THEN NULL
                       ELSE coalesce(l.details, array_fill(''::text, ARRAY[cardinality(l.kinds)]))
                            || coalesce(excluded.details, ARRAY[''::text]) END
    RETURNING cardinality(l.kinds) INTO pos;
    NEW.id := pos;
    NEW.details := coalesce(NEW.details, '');
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER task_messages_insert INSTEAD OF INSERT ON task_messages
    FOR EACH ROW EXECUTE FUNCTION task_messages_insert();

CREATE OR REPLACE VIEW audit_dead_letters AS
SELECT t.id AS task_id,
       t.run,
       c.name AS corpus,
       s.name AS service,
       t.entry,
       a.workers,
       a.last_leased_at,
       (SELECT string_agg(m.category || '/' || m.what, ', ' ORDER BY m.id)
        FROM task_messages m
        WHERE m.task_id = t.id AND m.run = t.run) AS cause,
       d.task_id IS NOT NULL AS held,
       d.forget_at
FROM tasks t
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = t.service_id
CROSS JOIN LATERAL (
    SELECT array_agg(x.worker ORDER BY x.attempt) AS workers, max(x.leased_at) AS last_leased_at
    FROM attempts x
    WHERE x.task_id = t.id AND x.run = t.run
) a
LEFT JOIN dispatch d ON d.task_id = t.id AND d.run = t.run
WHERE t.status = -4
  AND EXISTS (SELECT 1 FROM attempts x
              WHERE x.task_id = t.id AND x.run = t.run
                AND (x.outcome = 'dead_lettered' OR (x.outcome = 'retryable' AND x.status = -4)))
  AND NOT EXISTS (SELECT 1 FROM attempts x
                  WHERE x.task_id = t.id AND x.run = t.run AND x.outcome = 'accepted')
ORDER BY t.id;
COMMENT ON VIEW audit_dead_letters IS 'Tasks whose current run gave up and still stand as a stand-in Fatal.';

DROP TABLE task_messages_00014;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dispatch d USING gone g WHERE d.task_id = g.id;
    DELETE FROM attempts a USING gone g WHERE a.task_id = g.id;
    DELETE FROM task_message_logs m USING gone g WHERE m.task_id = g.id;
    INSERT INTO report_changes (task_id) SELECT g.id FROM gone g;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
CREATE TABLE task_messages_00014 (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id  bigint NOT NULL,
    run      integer NOT NULL,
    severity text NOT NULL,
    category varchar(100) NOT NULL,
    what     varchar(200) NOT NULL,
    details  varchar(2000) NOT NULL DEFAULT ''
);
INSERT INTO task_messages_00014 (task_id, run, severity, category, what, details)
SELECT task_id, run, severity, category, what, details FROM task_messages ORDER BY task_id, run, id;
CREATE INDEX task_messages_task_run ON task_messages_00014 (task_id, run, id);
CREATE INDEX task_messages_what_task ON task_messages_00014 (severity, category, what, task_id, id);
CREATE OR REPLACE VIEW audit_dead_letters AS
SELECT t.id AS task_id,
       t.run,
       c.name AS corpus,
       s.name AS service,
       t.entry,
       a.workers,
       a.last_leased_at,
       (SELECT string_agg(m.category || '/' || m.what, ', ' ORDER BY m.id)
        FROM task_messages_00014 m
        WHERE m.task_id = t.id AND m.run = t.run) AS cause,
       d.task_id IS NOT NULL AS held,
       d.forget_at
FROM tasks t
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = t.service_id
CROSS JOIN LATERAL (
    SELECT array_agg(x.worker ORDER BY x.attempt) AS workers, max(x.leased_at) AS last_leased_at
    FROM attempts x
    WHERE x.task_id = t.id AND x.run = t.run
) a
LEFT JOIN dispatch d ON d.task_id = t.id AND d.run = t.run
WHERE t.status = -4
  AND EXISTS (SELECT 1 FROM attempts x
              WHERE x.task_id = t.id AND x.run = t.run
                AND (x.outcome = 'dead_lettered' OR (x.outcome = 'retryable' AND x.status = -4)))
  AND NOT EXISTS (SELECT 1 FROM attempts x
                  WHERE x.task_id = t.id AND x.run = t.run AND x.outcome = 'accepted')
ORDER BY t.id;
DROP VIEW task_messages;
DROP FUNCTION task_messages_insert();
ALTER TABLE task_messages_00014 RENAME TO task_messages;
ALTER INDEX task_messages_00014_pkey RENAME TO task_messages_pkey;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dispatch d USING gone g WHERE d.task_id = g.id;
    DELETE FROM attempts a USING gone g WHERE a.task_id = g.id;
    DELETE FROM task_messages m USING gone g WHERE m.task_id = g.id;
    INSERT INTO report_changes (task_id) SELECT g.id FROM gone g;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TABLE task_message_logs;
DROP TABLE message_kinds;
