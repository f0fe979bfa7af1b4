-- chongming SQLite schema, migration 0002: one lease per node, command outcomes,
-- counts by (status, bucket, owner); the per-task supervisor lease goes away.

-- A node: one controller with a store, under its owner name. One row per owner,
-- renewed as one UPDATE whatever the number of tasks the node holds.
-- owned_buckets is a JSON array of ints, NULL when the node owns every bucket.
CREATE TABLE nodes (
    owner            TEXT    NOT NULL PRIMARY KEY,
    incarnation      TEXT    NOT NULL,
    host             TEXT    NOT NULL,
    pid              INTEGER NOT NULL,
    version          TEXT    NOT NULL,
    num_buckets      INTEGER NOT NULL,
    owned_buckets    TEXT,
    started_at       INTEGER NOT NULL,
    renewed_at       INTEGER NOT NULL,
    lease_expires_at INTEGER NOT NULL
) WITHOUT ROWID;

-- The store clock's high-water mark (microseconds): every lease decision reads
-- and raises it in the same transaction, so a wall clock stepped back (in any
-- process on this file) can never judge an expired lease alive again.
CREATE TABLE store_clock (
    id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    high_water INTEGER NOT NULL
);
INSERT INTO store_clock (id, high_water) VALUES (1, 0);

ALTER TABLE commands ADD COLUMN outcome TEXT;
CREATE INDEX commands_by_created ON commands (created_at, command_id);
CREATE INDEX commands_by_task ON commands (task_id, created_at, command_id);

-- The per-task lease columns go. Rebuilt rather than ALTER TABLE DROP COLUMN:
-- SQLite re-parses the stored CREATE TABLE text for that, and the comment that
-- 0001 put before the lease columns makes the result unparseable.
CREATE TABLE tasks_0002 (
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
    kwargs            TEXT    NOT NULL
);
INSERT INTO tasks_0002 SELECT
    task_id, name, label, status, status_version, attempt, max_attempts, bucket,
    bucket_key, tags, priority, owner, created_at, updated_at, queued_at, started_at,
    finished_at, last_heartbeat_at, progress, failure, result, args, kwargs
FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_0002 RENAME TO tasks;
CREATE INDEX tasks_by_created ON tasks (created_at, task_id);
CREATE INDEX tasks_by_status ON tasks (status, created_at);
CREATE INDEX tasks_by_bucket ON tasks (bucket, status);
CREATE INDEX tasks_by_owner ON tasks (owner, status);
CREATE INDEX tasks_by_name ON tasks (name, created_at);
-- task_counts: GROUP BY status, bucket, owner is a scan of this covering index.
CREATE INDEX tasks_by_status_bucket_owner ON tasks (status, bucket, owner);
