-- Dispatch rows by state per corpus and service, as `cortexq status` (TaskProgress) and the
-- dashboard (TotalsProgress) report them: one definition for the two, which had each written
-- it out.

-- +goose Up
CREATE VIEW dispatch_tally AS
SELECT t.corpus_id, t.service_id,
       count(*) FILTER (WHERE d.state = 'reserved') AS reserved,
       count(*) FILTER (WHERE d.state = 'in_flight') AS in_flight,
       count(*) FILTER (WHERE d.state = 'settling' AND NOT d.queued) AS settling,
       count(*) FILTER (WHERE d.queued) AS queued
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
GROUP BY t.corpus_id, t.service_id;
COMMENT ON VIEW dispatch_tally IS 'Dispatch rows per corpus and service: reserved, in flight, settling (not queued) and queued.';

-- +goose Down
DROP VIEW dispatch_tally;
