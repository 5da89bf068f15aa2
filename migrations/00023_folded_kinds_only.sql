-- report_folded keeps only the kinds of each task's log with their counts (00019): its entries of
-- its status's severity (categories, whats, messages) are those kinds' names filtered by the
-- status's severity, so the fold derives them from the kinds (queue/reports/foldbatch.go).
-- Written as three text and integer arrays a task they were most of the fold's writing: a batch's
-- rows came as slices of flat arrays, and slicing a text array walks it from its start
-- (docs/performance.md, "Messages").

-- +goose Up
ALTER TABLE report_folded DROP COLUMN categories, DROP COLUMN whats, DROP COLUMN messages;

-- +goose Down
ALTER TABLE report_folded ADD COLUMN categories text[] NOT NULL DEFAULT '{}',
    ADD COLUMN whats text[] NOT NULL DEFAULT '{}', ADD COLUMN messages integer[] NOT NULL DEFAULT '{}';
UPDATE report_folded f SET categories = e.categories, whats = e.whats, messages = e.messages
FROM (SELECT x.task_id, array_agg(k.category::text ORDER BY k.category, k.what) AS categories,
             array_agg(k.what::text ORDER BY k.category, k.what) AS whats,
             array_agg(x.n ORDER BY k.category, k.what) AS messages
      FROM (SELECT r.task_id, r.status, u.kind, u.n
            FROM report_folded r, unnest(r.kinds, r.counts) AS u (kind, n)) AS x
      JOIN message_kinds k ON k.id = x.kind AND k.severity = status_severity(x.status)
      GROUP BY x.task_id) AS e
WHERE e.task_id = f.task_id;
ALTER TABLE report_folded ALTER COLUMN categories DROP DEFAULT, ALTER COLUMN whats DROP DEFAULT,
    ALTER COLUMN messages DROP DEFAULT;
