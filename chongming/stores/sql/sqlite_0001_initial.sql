-- chongming SQLite schema, migration 0001: tasks, their history, commands.
--
-- Timestamps are INTEGER microseconds since the Unix epoch in UTC: exact,
-- ordered by value whatever offset the caller used, and cheap to compare.
-- Structured fields (tags, progress, failure, result, args, kwargs) are JSON text.

CREATE TABLE tasks (
    task_id           TEXT    NOT NULL PRIMARY KEY,
    name              TEXT    NOT NULL,
    label             TEXT    NOT NULL,
    status            TEXT    NOT NULL,
    status_version    INTEGER NOT NULL,
    attempt           INTEGER NOT NULL,
    max_attempts      INTEGER NOT NULL,
    bucket            INTEGER,
    bucket_key        TEXT,
    tags              TEXT    NOT NULL,
    priority          INTEGER NOT NULL,
    owner             TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    queued_at         INTEGER,
    started_at        INTEGER,
    finished_at       INTEGER,
    last_heartbeat_at INTEGER,
    progress          TEXT,
    failure           TEXT,
    result            TEXT    NOT NULL,
    args              TEXT    NOT NULL,
    kwargs            TEXT    NOT NULL,
    -- Supervisor lease: written only by renew_leases, never by save.
    lease_owner       TEXT,
    lease_expires_at  INTEGER
);

CREATE INDEX tasks_by_created ON tasks (created_at, task_id);
CREATE INDEX tasks_by_status ON tasks (status, created_at);
CREATE INDEX tasks_by_bucket ON tasks (bucket, status);
CREATE INDEX tasks_by_owner ON tasks (owner, status);
CREATE INDEX tasks_by_name ON tasks (name, created_at);

CREATE TABLE transitions (
    task_id     TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    from_status TEXT    NOT NULL,
    to_status   TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    trigger     TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    reason      TEXT,
    attempt     INTEGER NOT NULL,
    PRIMARY KEY (task_id, version)
) WITHOUT ROWID;

CREATE TABLE commands (
    command_id       TEXT    NOT NULL PRIMARY KEY,
    task_id          TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    actor            TEXT    NOT NULL,
    reason           TEXT,
    target_owner     TEXT,
    claimed_by       TEXT,
    lease_expires_at INTEGER,
    completed_at     INTEGER
);

CREATE INDEX commands_open ON commands (created_at, command_id) WHERE completed_at IS NULL;
