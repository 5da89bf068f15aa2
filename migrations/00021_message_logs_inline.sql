-- A run's log stays in its row of task_message_logs: compressed (lz4 where the server has it, as
-- 00015_message_logs.sql chose) once the row passes toast_tuple_target (256 bytes), but not moved
-- out of line into the TOAST table unless the row would not fit a page. A LaTeXML log of a hundred
-- messages compresses to a few hundred bytes; stored out of line it cost the claim a TOAST chunk
-- insert and a TOAST index insert a task, and each reader a second lookup
-- (docs/performance.md, "Real logs"). Applies to rows written from now on; older rows keep their
-- storage until rewritten (both are read the same way).

-- +goose Up
ALTER TABLE task_message_logs ALTER COLUMN kinds SET STORAGE MAIN,
    ALTER COLUMN details SET STORAGE MAIN;

-- +goose Down
ALTER TABLE task_message_logs ALTER COLUMN kinds SET STORAGE EXTENDED,
    ALTER COLUMN details SET STORAGE EXTENDED;
