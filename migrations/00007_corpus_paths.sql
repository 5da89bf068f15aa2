-- Replicas now read sources and write results beneath their corpus's path only. Corpora made
-- before took the first PATH (a single archive, perhaps) or the directory of an import list as
-- their path, which need not hold their entries: each such corpus (and one with no absolute
-- path) gets the deepest directory holding all of them, or its tasks would no longer be served. The common prefix of the least
-- and the greatest entry (in byte order) is that of all of them; it is cut back to a directory.

-- +goose Up
WITH bounds AS (
    SELECT corpus_id, min(entry COLLATE "C") AS lo, max(entry COLLATE "C") AS hi
    FROM tasks
    GROUP BY corpus_id
), common AS (
    SELECT corpus_id, left(lo, (SELECT max(n) FROM generate_series(0, least(length(lo), length(hi))) AS n
                               WHERE left(lo, n) = left(hi, n))) AS prefix
    FROM bounds
)
UPDATE corpora c
SET path = coalesce(nullif(substring(common.prefix FROM '^(.*)/'), ''), '/')
FROM common
WHERE common.corpus_id = c.id
  AND left(common.prefix, 1) = '/'
  AND EXISTS (SELECT 1 FROM tasks t
              WHERE t.corpus_id = c.id
                AND (c.path NOT LIKE '/%'
                     OR left(t.entry, length(rtrim(c.path, '/')) + 1) <> rtrim(c.path, '/') || '/'));

-- +goose Down
-- The corpora's former paths are not kept: nothing to undo.
SELECT 1;
