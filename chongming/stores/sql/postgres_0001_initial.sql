-- chongming PostgreSQL schema, migration 0001: tasks, their history, commands.
--
-- "@schema" stands for the quoted schema name (PostgresTaskStore(schema=...)).
-- The task columns are chongming/stores/columns.py's table, in its order
-- (tests/stores/test_columns.py checks it); the lease columns follow.
CREATE TABLE IF NOT EXISTS @schema.tasks (
    task_id           text        PRIMARY KEY,
    name              text        NOT NULL,
    label             text        NOT NULL,
    status            text        NOT NULL,
    status_version    integer     NOT NULL,
    attempt           integer     NOT NULL,
    max_attempts      integer     NOT NULL,
    bucket            integer,
    bucket_key        text,
    tags              text[]      NOT NULL DEFAULT '{}',
    priority          integer     NOT NULL DEFAULT 0,
    owner             text,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    queued_at         timestamptz,
    started_at        timestamptz,
    finished_at       timestamptz,
    last_heartbeat_at timestamptz,
    progress          jsonb,
    failure           jsonb,
    result            jsonb,
    args              jsonb       NOT NULL DEFAULT '[]',
    kwargs            jsonb       NOT NULL DEFAULT '{}',
    lease_owner       text,
    lease_expires_at  timestamptz
);
CREATE INDEX IF NOT EXISTS tasks_status_idx  ON @schema.tasks (status);
CREATE INDEX IF NOT EXISTS tasks_bucket_idx  ON @schema.tasks (bucket);
CREATE INDEX IF NOT EXISTS tasks_owner_idx   ON @schema.tasks (owner);
CREATE INDEX IF NOT EXISTS tasks_name_idx    ON @schema.tasks (name);
CREATE INDEX IF NOT EXISTS tasks_created_idx ON @schema.tasks (created_at, task_id COLLATE "C");
CREATE INDEX IF NOT EXISTS tasks_tags_idx    ON @schema.tasks USING gin (tags);
CREATE INDEX IF NOT EXISTS tasks_lease_idx   ON @schema.tasks (lease_expires_at)
    WHERE status NOT IN ('succeeded', 'failed', 'stopped', 'cancelled', 'skipped', 'lost');

CREATE TABLE IF NOT EXISTS @schema.transitions (
    task_id     text        NOT NULL,
    version     integer     NOT NULL,
    from_status text        NOT NULL,
    to_status   text        NOT NULL,
    at          timestamptz NOT NULL,
    trigger     text        NOT NULL,
    actor       text        NOT NULL,
    reason      text,
    attempt     integer     NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, version)
);

CREATE TABLE IF NOT EXISTS @schema.commands (
    command_id       text        PRIMARY KEY,
    task_id          text        NOT NULL,
    kind             text        NOT NULL,
    created_at       timestamptz NOT NULL,
    actor            text        NOT NULL,
    reason           text,
    target_owner     text,
    claimed_by       text,
    claim_token      text,
    lease_expires_at timestamptz,
    completed_at     timestamptz,
    completed_by     text
);
CREATE INDEX IF NOT EXISTS commands_open_idx ON @schema.commands (created_at, command_id COLLATE "C")
    WHERE completed_at IS NULL;
CREATE INDEX IF NOT EXISTS commands_task_idx ON @schema.commands (task_id);
