-- The final shape of a CorTeX database (v0.6, diesel migrations), as far as an import reads it,
-- written from the notes on CorTeX's schema in docs/operations.md#moving-from-cortex: the
-- tables, their columns, keys and defaults. uuidv7() needs PostgreSQL 18 (the test substitutes
-- gen_random_uuid() on older servers). Not CorTeX's own files: a faithful copy for the tests.

CREATE TABLE services (
    id serial PRIMARY KEY,
    name varchar(200) NOT NULL,
    version real NOT NULL,
    inputformat varchar(20) NOT NULL,
    outputformat varchar(20) NOT NULL,
    inputconverter varchar(200),
    complex boolean NOT NULL,
    description text NOT NULL DEFAULT '',
    public_id uuid NOT NULL DEFAULT uuidv7() UNIQUE,
    lease_timeout_seconds integer,
    UNIQUE (name, version)
);
INSERT INTO services (name, version, inputformat, outputformat, complex, description)
VALUES ('init', 0.1, 'tex', 'tex', true, 'the built-in init service'),
       ('import', 0.1, 'tex', 'tex', true, 'the built-in import service');

CREATE TABLE corpora (
    id serial PRIMARY KEY,
    path varchar(200) NOT NULL,
    name varchar(200) NOT NULL,
    complex boolean NOT NULL,
    description text NOT NULL DEFAULT '',
    parent_corpus_id integer,
    selection jsonb,
    public_id uuid NOT NULL DEFAULT uuidv7() UNIQUE
);
CREATE UNIQUE INDEX corpora_name_lower ON corpora (lower(name));

CREATE TABLE tasks (
    id bigserial PRIMARY KEY,
    service_id integer NOT NULL REFERENCES services (id) ON DELETE CASCADE,
    corpus_id integer NOT NULL REFERENCES corpora (id) ON DELETE CASCADE,
    status integer NOT NULL,
    entry varchar(4096) NOT NULL,
    UNIQUE (entry, service_id, corpus_id)
);
CREATE INDEX tasks_todo ON tasks (service_id, status) WHERE status = 0;

CREATE TABLE log_infos (
    id bigserial PRIMARY KEY,
    task_id bigint NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    category varchar(100),
    what varchar(200),
    details varchar(2000)
);
CREATE TABLE log_warnings (
    id bigserial PRIMARY KEY,
    task_id bigint NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    category varchar(100),
    what varchar(200),
    details varchar(2000),
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE log_errors (LIKE log_warnings INCLUDING DEFAULTS);
ALTER TABLE log_errors ADD PRIMARY KEY (id), ADD FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE;
CREATE SEQUENCE log_errors_id_seq OWNED BY log_errors.id;
ALTER TABLE log_errors ALTER COLUMN id SET DEFAULT nextval('log_errors_id_seq');
CREATE TABLE log_fatals (LIKE log_warnings INCLUDING DEFAULTS);
ALTER TABLE log_fatals ADD PRIMARY KEY (id), ADD FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE;
CREATE SEQUENCE log_fatals_id_seq OWNED BY log_fatals.id;
ALTER TABLE log_fatals ALTER COLUMN id SET DEFAULT nextval('log_fatals_id_seq');
CREATE TABLE log_invalids (
    id bigserial PRIMARY KEY,
    task_id bigint NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    category varchar(100),
    what varchar(200),
    details varchar(2000)
);
CREATE INDEX log_infos_task ON log_infos (task_id);
CREATE INDEX log_warnings_task ON log_warnings (task_id);
CREATE INDEX log_errors_task ON log_errors (task_id);
CREATE INDEX log_fatals_task ON log_fatals (task_id);
CREATE INDEX log_invalids_task ON log_invalids (task_id);

CREATE TABLE task_runtimes (
    task_id bigint PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    service_id integer NOT NULL,
    runtime_ms integer NOT NULL
);

CREATE TABLE historical_runs (
    id serial PRIMARY KEY,
    service_id integer NOT NULL,
    corpus_id integer NOT NULL,
    total integer NOT NULL DEFAULT 0,
    invalid integer NOT NULL DEFAULT 0,
    fatal integer NOT NULL DEFAULT 0,
    error integer NOT NULL DEFAULT 0,
    warning integer NOT NULL DEFAULT 0,
    no_problem integer NOT NULL DEFAULT 0,
    in_progress integer NOT NULL DEFAULT 0,
    start_time timestamp NOT NULL DEFAULT now(),
    end_time timestamp,
    owner varchar(200) NOT NULL,
    description text NOT NULL DEFAULT '',
    public_id uuid NOT NULL DEFAULT uuidv7() UNIQUE
);

CREATE TABLE historical_tasks (
    id bigserial PRIMARY KEY,
    task_id bigint NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    status integer NOT NULL,
    saved_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX historical_tasks_saved_at ON historical_tasks (saved_at);

CREATE TABLE worker_metadata (
    id serial PRIMARY KEY,
    service_id integer NOT NULL,
    last_dispatched_task_id bigint NOT NULL,
    last_returned_task_id bigint,
    total_dispatched integer NOT NULL DEFAULT 0,
    total_returned integer NOT NULL DEFAULT 0,
    first_seen timestamp NOT NULL,
    session_seen timestamp,
    time_last_dispatch timestamp NOT NULL,
    time_last_return timestamp,
    name varchar(200) NOT NULL,
    UNIQUE (name, service_id)
);

-- Not read by an import; present on a CorTeX site.
CREATE TABLE jobs (id bigserial PRIMARY KEY, kind text NOT NULL, created_at timestamp NOT NULL DEFAULT now());
CREATE TABLE audit_log (id bigserial PRIMARY KEY, action text NOT NULL, at timestamp NOT NULL DEFAULT now());
