-- chongming SQLite schema, migration 0011: schedules.
--
-- One row per schedule, keyed by its name. next_fire is the oldest tick not yet
-- decided (microseconds since the epoch, UTC). revision is bumped by every
-- change; a fire is a compare-and-set on it inside BEGIN IMMEDIATE, together
-- with the enqueue of the tick's task (its idempotency key holds the tick).
CREATE TABLE schedules (
    key          TEXT    NOT NULL PRIMARY KEY,
    task_name    TEXT    NOT NULL,
    cron         TEXT,
    every_micros INTEGER CHECK (every_micros > 0),
    timezone     TEXT    NOT NULL,
    args         TEXT    NOT NULL,
    kwargs       TEXT    NOT NULL,
    catch_up     TEXT    NOT NULL CHECK (catch_up IN ('skip', 'latest', 'all')),
    paused       INTEGER NOT NULL DEFAULT 0,
    next_fire    INTEGER NOT NULL,
    last_fired   INTEGER,
    revision     INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    CHECK ((cron IS NULL) <> (every_micros IS NULL))
) WITHOUT ROWID;
