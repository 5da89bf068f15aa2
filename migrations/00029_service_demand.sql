-- Each replica's demand per service, so that replicas size their reservations by the whole
-- service's demand, not by their own slice of it (docs/performance.md#replicas-sharing-one-database).
--
-- service_demand: once a second, each replica that workers ask notes how many requests per
-- second it had for each service, and reads the sum of the others' fresh notes in the same
-- statement. A row is one replica's for one service; a replica that stopped noting (stopped, or
-- its workers left) falls out of the sum once its note is a few seconds old. Replicas of earlier
-- releases neither write nor read it.

-- +goose Up
CREATE TABLE service_demand (
    service_id     int NOT NULL,
    replica        text NOT NULL,
    requests_per_s float8 NOT NULL,
    seen_at        timestamptz NOT NULL,
    PRIMARY KEY (service_id, replica)
);
COMMENT ON TABLE service_demand IS 'Each replica''s requests per second for each service (noted every second), which sizes every replica''s reservations by the whole service''s demand.';
INSERT INTO audit_readable (name) VALUES ('service_demand');

-- +goose Down
DELETE FROM audit_readable WHERE name = 'service_demand';
DROP TABLE service_demand;
