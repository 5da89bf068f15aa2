-- Most messages of a kind carry the same details: LaTeXML's Info:loaded_file:<binding> messages,
-- nine in ten of a typical log, all give the same path on a fleet installed alike. A kind now
-- keeps those details once (message_kinds.usual_details, set when the kind is added from the
-- first message of it, never changed), and a log stores NULL for a message whose details are its
-- kind's usual ones. Sending and compressing those paths again for every task was a third of the
-- cost of writing a LaTeXML log (docs/performance.md, "Messages").
--
-- What task_message_logs.details means from now on:
--   NULL                       every message's details are empty (as before);
--   an array, element NULL     that message's details are its kind's usual_details ('' if none);
--   an array, element text     that message's details, as they are.
-- Rows written before hold no NULL element: they read the same.

-- +goose Up
ALTER TABLE message_kinds ADD COLUMN usual_details text;
COMMENT ON COLUMN message_kinds.usual_details IS
    'The details of the first message of this kind (NULL: none, or too long to keep); a NULL element of task_message_logs.details stands for them.';
COMMENT ON TABLE task_message_logs IS
    'One task''s log messages of one run: message_kinds ids and details (NULL: all empty; a NULL element: the kind''s usual_details), in log order.';

CREATE OR REPLACE VIEW task_messages AS
SELECT x.n::bigint AS id,
       l.task_id,
       l.run,
       k.severity,
       k.category,
       k.what,
       (CASE WHEN l.details IS NULL THEN ''
             ELSE coalesce(x.details, k.usual_details, '') END)::varchar(2000) AS details
FROM task_message_logs l
CROSS JOIN LATERAL unnest(l.kinds, l.details) WITH ORDINALITY AS x (kind, details, n)
JOIN message_kinds k ON k.id = x.kind;

-- +goose Down
-- Every NULL element becomes the details it stood for, as the code before this migration reads
-- them.
UPDATE task_message_logs l
SET details = (SELECT array_agg(coalesce(x.details, k.usual_details, '') ORDER BY x.n)
               FROM unnest(l.kinds, l.details) WITH ORDINALITY AS x (kind, details, n)
               JOIN message_kinds k ON k.id = x.kind)
WHERE l.details IS NOT NULL
  AND (array_position(l.details, NULL) IS NOT NULL OR cardinality(l.details) < cardinality(l.kinds));

CREATE OR REPLACE VIEW task_messages AS
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

COMMENT ON TABLE task_message_logs IS
    'One task''s log messages of one run: message_kinds ids and details (NULL: all empty), in log order.';
ALTER TABLE message_kinds DROP COLUMN usual_details;
