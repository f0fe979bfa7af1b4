-- chongming PostgreSQL schema, migration 0005: durable execution.
-- "@schema" stands for the quoted schema name.
--
-- A durable task has one row here from its first attempt on: the epoch of the
-- attempt that may write for it now (raised by every attempt's start, so an
-- older attempt that is still running somewhere is fenced off) and how many
-- times a dead worker's attempt may be resumed before the task fails.
CREATE TABLE IF NOT EXISTS @schema.durable_runs (
    task_id     text PRIMARY KEY,
    epoch       integer NOT NULL,
    max_resumes integer NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Memoised steps: one row per (task, step name, occurrence), written once by
-- the attempt holding the epoch (checked with the run row locked FOR SHARE in
-- the same transaction); seq is the order they were recorded in.
CREATE TABLE IF NOT EXISTS @schema.durable_steps (
    task_id     text NOT NULL,
    name        text NOT NULL,
    occurrence  integer NOT NULL,
    seq         integer NOT NULL,
    ok          boolean NOT NULL,
    value       jsonb NOT NULL,
    epoch       integer NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, name, occurrence),
    UNIQUE (task_id, seq)
);
