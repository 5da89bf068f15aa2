-- Fair share across the corpora of a service (docs/semantics.md#fair-share). Reservations take a
-- service's TODO tasks corpus by corpus: the highest priority first, and within a priority in
-- proportion to each corpus's weight. corpus_shares holds the weight and priority of every
-- corpus and service that has (or had) tasks: a trigger adds the row, with the defaults, when
-- tasks of a new corpus and service are inserted, whatever inserts them. The reservation walks
-- these rows of its service (a few, one per corpus) and reads each corpus's next TODO tasks from
-- tasks_todo, now keyed (service_id, corpus_id, id): rows read per reservation are bounded by
-- the batch and the number of corpora, never by a backlog.

-- +goose Up
CREATE TABLE corpus_shares (
    service_id integer NOT NULL REFERENCES services (id) ON DELETE CASCADE,
    corpus_id  integer NOT NULL REFERENCES corpora (id) ON DELETE CASCADE,
    -- Within a priority, corpora are served in proportion to their weights.
    weight     integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000000),
    -- A higher priority is served strictly first.
    priority   integer NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000000 AND 1000000),
    PRIMARY KEY (service_id, corpus_id)
);
COMMENT ON TABLE corpus_shares IS 'Fair share of each corpus and service: reservations serve the highest priority first and, within a priority, corpora in proportion to weight.';

INSERT INTO corpus_shares (service_id, corpus_id)
SELECT DISTINCT service_id, corpus_id FROM tasks
ON CONFLICT DO NOTHING;

-- +goose StatementBegin
CREATE FUNCTION tasks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO corpus_shares (service_id, corpus_id)
    SELECT DISTINCT n.service_id, n.corpus_id FROM added n
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION tasks_inserted() IS 'Gives each new corpus and service its corpus_shares row (weight 1, priority 0).';
CREATE TRIGGER tasks_inserted AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION tasks_inserted();

-- The reservation reads TODO tasks per corpus, in id order.
DROP INDEX tasks_todo;
CREATE INDEX tasks_todo ON tasks (service_id, corpus_id, id) WHERE status = 0;

-- +goose Down
DROP INDEX tasks_todo;
CREATE INDEX tasks_todo ON tasks (service_id, id) WHERE status = 0;
DROP TRIGGER tasks_inserted ON tasks;
DROP FUNCTION tasks_inserted();
DROP TABLE corpus_shares;
