-- The corpus lifecycle (docs/operations.md#corpus-lifecycle): deleting a corpus or a service
-- keeps the tallies of its runs. A run names its corpus and service (corpus_name, service_name,
-- set on insert); a deletion detaches its runs (corpus_id or service_id NULL), so that they stay
-- readable by name, and no row points at a corpus or service that is gone.

-- +goose Up
ALTER TABLE runs ADD COLUMN corpus_name text, ADD COLUMN service_name text;
UPDATE runs r SET corpus_name = c.name, service_name = s.name
FROM corpora c, services s
WHERE c.id = r.corpus_id AND s.id = r.service_id;
ALTER TABLE runs ALTER COLUMN corpus_id DROP NOT NULL,
                 ALTER COLUMN service_id DROP NOT NULL;
COMMENT ON COLUMN runs.corpus_name IS 'The corpus''s name, kept when the corpus is deleted (corpus_id NULL then).';
COMMENT ON COLUMN runs.service_name IS 'The service''s name, kept when the service is deleted (service_id NULL then).';

-- +goose StatementBegin
CREATE FUNCTION runs_named() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.corpus_name IS NULL THEN
        NEW.corpus_name := (SELECT name FROM corpora WHERE id = NEW.corpus_id);
    END IF;
    IF NEW.service_name IS NULL THEN
        NEW.service_name := (SELECT name FROM services WHERE id = NEW.service_id);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER runs_named BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION runs_named();

-- +goose Down
DROP TRIGGER runs_named ON runs;
DROP FUNCTION runs_named();
DELETE FROM runs WHERE corpus_id IS NULL OR service_id IS NULL;
ALTER TABLE runs ALTER COLUMN corpus_id SET NOT NULL,
                 ALTER COLUMN service_id SET NOT NULL;
ALTER TABLE runs DROP COLUMN corpus_name, DROP COLUMN service_name;
