-- Reservations (DESIGN §4 "Reserve / Hand-out / Attribute"): a replica reserves tasks ahead of
-- demand in batches, hands them out from memory, and records each hand-out's worker in batched
-- writes. A reserved row is a dispatch row with no worker for its next attempt yet, owned by
-- the replica that reserved it (replica) until its reservation deadline (deadline); leased_at
-- is when it was reserved. A fresh reservation has no attempts at all; a reserved retry keeps
-- the workers of its earlier attempts.

-- +goose Up
ALTER TABLE dispatch DROP CONSTRAINT dispatch_state_check;
ALTER TABLE dispatch ADD CONSTRAINT dispatch_state_check
    CHECK (state IN ('reserved', 'in_flight', 'settling'));
ALTER TABLE dispatch DROP CONSTRAINT dispatch_attempt_workers_check;
ALTER TABLE dispatch ADD CONSTRAINT dispatch_attempt_workers_check
    CHECK (cardinality(attempt_workers) >= 1 OR state = 'reserved');
ALTER TABLE dispatch DROP CONSTRAINT dispatch_check2;
ALTER TABLE dispatch ADD CONSTRAINT dispatch_settling_forget_at
    CHECK (state <> 'settling' OR forget_at IS NOT NULL);
-- A reservation is open: nothing answered, no result, no dead letter, nothing to forget.
ALTER TABLE dispatch ADD CONSTRAINT dispatch_reserved_open
    CHECK (state <> 'reserved' OR (NOT answered AND finished_attempt IS NULL AND NOT dead_lettered
                                   AND forget_at IS NULL AND received_at IS NULL));
COMMENT ON COLUMN dispatch.state IS
    'reserved: held by replica for a hand-out until deadline, no worker yet; in_flight: leased to attempt_workers[last] until deadline; settling: out of flight, held for late results (and, while queued, waiting for a retry).';

-- A task never has two rows that could lease it or that it is leased under: a reservation counts.
DROP INDEX dispatch_one_active;
CREATE UNIQUE INDEX dispatch_one_active ON dispatch (task_id) WHERE state IN ('in_flight', 'reserved') OR queued;
-- The reaper returns reservations past their deadline. Not by replica: an attribution looks its
-- rows up by task id, and an index by replica lured its plan into reading the replica's whole
-- stock for each batch.
CREATE INDEX dispatch_reserved ON dispatch (deadline) WHERE state = 'reserved';

ALTER TABLE reaper_passes ADD COLUMN released integer NOT NULL DEFAULT 0;
COMMENT ON COLUMN reaper_passes.released IS 'Reservations past their deadline returned unhanded (no attempt counted).';

CREATE VIEW audit_reserved AS
SELECT d.task_id,
       d.run,
       c.name AS corpus,
       s.name AS service,
       t.entry,
       d.replica AS reserved_by,
       d.leased_at AS reserved_at,
       d.deadline AS reserved_until,
       round(extract(epoch FROM d.deadline - now()), 1) AS expires_in_seconds,
       cardinality(d.attempt_workers) AS attempt,
       d.attempt_workers AS earlier_workers,
       d.retries
FROM dispatch d
JOIN tasks t ON t.id = d.task_id
JOIN corpora c ON c.id = t.corpus_id
JOIN services s ON s.id = d.service_id
WHERE d.state = 'reserved'
ORDER BY d.replica, d.deadline, d.task_id;
COMMENT ON VIEW audit_reserved IS 'Tasks reserved by a replica and not yet handed to a worker (or handed, the worker not yet recorded): by which replica, until when. attempt is the 0-based attempt a hand-out starts.';

-- +goose Down
DROP VIEW audit_reserved;
ALTER TABLE reaper_passes DROP COLUMN released;
-- Reservations go back to where they came from: fresh ones to TODO, retries to the queue.
UPDATE tasks t SET status = 0
FROM dispatch d
WHERE d.task_id = t.id AND d.state = 'reserved' AND cardinality(d.attempt_workers) = 0 AND t.status = 1;
DELETE FROM dispatch WHERE state = 'reserved' AND cardinality(attempt_workers) = 0;
UPDATE dispatch SET state = 'settling', queued = true, forget_at = now() + interval '1 hour'
WHERE state = 'reserved';
DROP INDEX dispatch_reserved;
DROP INDEX dispatch_one_active;
CREATE UNIQUE INDEX dispatch_one_active ON dispatch (task_id) WHERE state = 'in_flight' OR queued;
ALTER TABLE dispatch DROP CONSTRAINT dispatch_reserved_open;
ALTER TABLE dispatch DROP CONSTRAINT dispatch_settling_forget_at;
ALTER TABLE dispatch ADD CONSTRAINT dispatch_check2 CHECK (state = 'in_flight' OR forget_at IS NOT NULL);
ALTER TABLE dispatch DROP CONSTRAINT dispatch_attempt_workers_check;
ALTER TABLE dispatch ADD CONSTRAINT dispatch_attempt_workers_check CHECK (cardinality(attempt_workers) >= 1);
ALTER TABLE dispatch DROP CONSTRAINT dispatch_state_check;
ALTER TABLE dispatch ADD CONSTRAINT dispatch_state_check CHECK (state IN ('in_flight', 'settling'));
