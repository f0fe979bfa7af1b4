-- chongming PostgreSQL schema, migration 0012: schedules.
-- "@schema" stands for the quoted schema name.
--
-- One row per schedule, keyed by its name. next_fire is the oldest tick not yet
-- decided. revision is bumped by every change; a fire locks the row (FOR
-- UPDATE), compares the revision, enqueues the tick's task (its idempotency key
-- holds the tick) and advances next_fire, in one transaction.
CREATE TABLE IF NOT EXISTS @schema.schedules (
    key          text PRIMARY KEY,
    task_name    text NOT NULL,
    cron         text,
    every_micros bigint CHECK (every_micros > 0),
    timezone     text NOT NULL,
    args         jsonb NOT NULL,
    kwargs       jsonb NOT NULL,
    catch_up     text NOT NULL CHECK (catch_up IN ('skip', 'latest', 'all')),
    paused       boolean NOT NULL DEFAULT false,
    next_fire    timestamptz NOT NULL,
    last_fired   timestamptz,
    revision     integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((cron IS NULL) <> (every_micros IS NULL))
);
