-- The cortexq schema: every piece of dispatch state lives in these rows (DESIGN §4).

-- +goose Up
CREATE TABLE services (
    id                    integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                  text NOT NULL UNIQUE
                          CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.+-]{0,199}$'),
    -- Overrides the replica's default lease for this service's tasks.
    lease_timeout_seconds integer CHECK (lease_timeout_seconds > 0),
    created_at            timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE services IS 'Worker services (tex_to_html, echo, ...). A task belongs to one service.';

CREATE TABLE corpora (
    id               integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text NOT NULL UNIQUE CHECK (name <> ''),
    path             text NOT NULL DEFAULT '',
    -- A corpus with a parent is a sandbox: its result archives are named <service>.sandbox-<id>.zip.
    parent_corpus_id integer REFERENCES corpora (id),
    created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tasks (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    service_id integer NOT NULL REFERENCES services (id),
    corpus_id  integer NOT NULL REFERENCES corpora (id),
    -- Path of the source archive; the result goes beside it.
    entry      text NOT NULL CHECK (entry <> ''),
    -- 0 TODO, 1 dispatched, -1 NoProblem, -2 Warning, -3 Error, -4 Fatal, -5 Invalid, -6 blocked.
    status     smallint NOT NULL DEFAULT 0 CHECK (status BETWEEN -6 AND 1),
    -- Starts at 1 and grows with each operator rerun.
    run        integer NOT NULL DEFAULT 1 CHECK (run >= 1),
    UNIQUE (corpus_id, service_id, entry)
) WITH (fillfactor = 80);
CREATE INDEX tasks_todo ON tasks (service_id, id) WHERE status = 0;
CREATE INDEX tasks_corpus_service_status ON tasks (corpus_id, service_id, status);

CREATE TABLE dispatch (
    task_id               bigint NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    run                   integer NOT NULL,
    -- in_flight: leased to attempt_workers[last]; settling: out of flight, held for late results
    -- (and, while queued, waiting for a worker to retry it).
    state                 text NOT NULL CHECK (state IN ('in_flight', 'settling')),
    attempt_workers       text[] NOT NULL CHECK (cardinality(attempt_workers) >= 1),
    deadline              timestamptz NOT NULL,
    -- The current attempt answered with something that is not a result (unusable archive or a
    -- retryable cause): only the reaper moves it on.
    answered              boolean NOT NULL DEFAULT false,
    -- The 0-based attempt whose result stands, and that result's status.
    finished_attempt      integer,
    finished_status       smallint,
    queued                boolean NOT NULL DEFAULT false,
    replica               text NOT NULL,
    service_id            integer NOT NULL,
    retries               integer NOT NULL DEFAULT 0 CHECK (retries >= 0),
    lease_timeout_seconds integer NOT NULL CHECK (lease_timeout_seconds > 0),
    leased_at             timestamptz NOT NULL,
    dead_lettered         boolean NOT NULL DEFAULT false,
    last_cause            jsonb,
    forget_at             timestamptz,
    -- A result for this task is being written: the reaper leaves it alone for a grace period.
    received_at           timestamptz,
    PRIMARY KEY (task_id, run),
    CHECK (NOT queued OR state = 'settling'),
    CHECK ((finished_attempt IS NULL) = (finished_status IS NULL)),
    CHECK (state = 'in_flight' OR forget_at IS NOT NULL)
) WITH (fillfactor = 70,
        autovacuum_vacuum_scale_factor = 0.02,
        autovacuum_vacuum_cost_delay = 0,
        autovacuum_analyze_scale_factor = 0.05);
COMMENT ON TABLE dispatch IS 'One row per task and run while the task is in flight, queued for a retry, or held for late results.';
-- A task never has two rows that could lease it or that it is leased under.
CREATE UNIQUE INDEX dispatch_one_active ON dispatch (task_id) WHERE state = 'in_flight' OR queued;
CREATE INDEX dispatch_expiry ON dispatch (deadline) WHERE state = 'in_flight';
CREATE INDEX dispatch_queued ON dispatch (service_id, task_id) WHERE queued;
CREATE INDEX dispatch_forget ON dispatch (forget_at) WHERE state = 'settling' AND NOT queued;

CREATE TABLE attempts (
    task_id     bigint NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    run         integer NOT NULL,
    attempt     integer NOT NULL CHECK (attempt >= 0),
    worker      text NOT NULL,
    replica     text NOT NULL,
    leased_at   timestamptz NOT NULL,
    answered_at timestamptz,
    -- accepted, superseded, stale, retryable, unusable, expired, dead_lettered; NULL while running.
    outcome     text,
    status      smallint,
    PRIMARY KEY (task_id, run, attempt)
);
COMMENT ON TABLE attempts IS 'Append-only audit trail: one row per dispatch attempt.';
CREATE INDEX attempts_worker ON attempts (worker, leased_at);

CREATE TABLE task_messages (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id  bigint NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    run      integer NOT NULL,
    severity text NOT NULL,
    category varchar(100) NOT NULL,
    what     varchar(200) NOT NULL,
    details  varchar(2000) NOT NULL DEFAULT ''
);
CREATE INDEX task_messages_task ON task_messages (task_id, run);
CREATE INDEX task_messages_what ON task_messages (severity, category, what);

CREATE TABLE runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    corpus_id   integer NOT NULL REFERENCES corpora (id),
    service_id  integer NOT NULL REFERENCES services (id),
    started_at  timestamptz NOT NULL DEFAULT now(),
    ended_at    timestamptz,
    -- What the rerun that ended this run selected (severity, category, what), if anything.
    scope       jsonb,
    tasks       bigint NOT NULL DEFAULT 0,
    todo        bigint NOT NULL DEFAULT 0,
    no_problem  bigint NOT NULL DEFAULT 0,
    warning     bigint NOT NULL DEFAULT 0,
    error       bigint NOT NULL DEFAULT 0,
    fatal       bigint NOT NULL DEFAULT 0,
    invalid     bigint NOT NULL DEFAULT 0,
    blocked     bigint NOT NULL DEFAULT 0,
    note        text NOT NULL DEFAULT ''
);
COMMENT ON TABLE runs IS 'Run history per corpus and service: each rerun closes a row with the tallies it replaced.';

CREATE TABLE workers (
    name         text NOT NULL,
    service_id   integer NOT NULL REFERENCES services (id),
    first_seen   timestamptz NOT NULL DEFAULT now(),
    last_request timestamptz,
    last_result  timestamptz,
    dispatched   bigint NOT NULL DEFAULT 0,
    results      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (name, service_id)
);

CREATE TABLE reaper_passes (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    replica       text NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    requeued      integer NOT NULL,
    dead_lettered integer NOT NULL,
    forgotten     integer NOT NULL
);
CREATE INDEX reaper_passes_at ON reaper_passes (at);

-- +goose Down
DROP TABLE reaper_passes;
DROP TABLE workers;
DROP TABLE runs;
DROP TABLE task_messages;
DROP TABLE attempts;
DROP TABLE dispatch;
DROP TABLE tasks;
DROP TABLE corpora;
DROP TABLE services;
