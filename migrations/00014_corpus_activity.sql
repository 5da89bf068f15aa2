-- Per corpus and service, what is moving now: dead letters of the current runs and the attempts
-- trail's last minute. `cortexq status` (TaskProgress) and the dashboard's background figures
-- (TotalsActivity) both read this view, which had been written out in each; its dead letters
-- are audit_dead_letters' rows, so the rule for what counts as one is in that view alone.

-- +goose Up
CREATE VIEW audit_corpus_activity AS
WITH dead AS (
    SELECT c.id AS corpus_id, s.id AS service_id, count(*) AS dead_letters
    FROM audit_dead_letters x
    JOIN corpora c ON c.name = x.corpus
    JOIN services s ON s.name = x.service
    GROUP BY c.id, s.id
), recent AS (
    SELECT corpus_id, service_id, replies, leases,
           coalesce(leases::float8 / nullif(sum(leases) OVER (PARTITION BY service_id), 0), 0) AS lease_share
    FROM (
        SELECT t.corpus_id, t.service_id,
               count(*) FILTER (WHERE a.answered_at > now() - interval '1 minute') AS replies,
               count(*) FILTER (WHERE a.leased_at > now() - interval '1 minute') AS leases
        FROM attempts a
        JOIN tasks t ON t.id = a.task_id
        WHERE a.answered_at > now() - interval '1 minute' OR a.leased_at > now() - interval '1 minute'
        GROUP BY t.corpus_id, t.service_id
    ) r
), activity AS (
    SELECT coalesce(dead.corpus_id, recent.corpus_id) AS corpus_id,
           coalesce(dead.service_id, recent.service_id) AS service_id,
           coalesce(dead.dead_letters, 0) AS dead_letters,
           coalesce(recent.replies, 0) AS replies_last_minute,
           coalesce(recent.leases, 0) AS leases_last_minute,
           coalesce(recent.lease_share, 0)::float8 AS lease_share_last_minute
    FROM dead
    FULL JOIN recent ON recent.corpus_id = dead.corpus_id AND recent.service_id = dead.service_id
)
SELECT c.name AS corpus, s.name AS service, a.corpus_id, a.service_id, a.dead_letters,
       a.replies_last_minute, a.leases_last_minute, a.lease_share_last_minute
FROM activity a
JOIN corpora c ON c.id = a.corpus_id
JOIN services s ON s.id = a.service_id;
COMMENT ON VIEW audit_corpus_activity IS 'Per corpus and service with anything moving: dead letters of the current runs, replies and leases over the last minute, and the corpus''s share of its service''s leases.';

-- +goose Down
DROP VIEW audit_corpus_activity;
