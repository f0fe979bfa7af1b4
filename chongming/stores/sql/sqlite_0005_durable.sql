-- chongming SQLite schema, migration 0005: durable execution.
--
-- A durable task has one row here from its first attempt on: the epoch of the
-- attempt that may write for it now (raised by every attempt's start, so an
-- older attempt that is still running somewhere is fenced off) and how many
-- times a dead worker's attempt may be resumed before the task fails.
CREATE TABLE durable_runs (
    task_id     TEXT    NOT NULL PRIMARY KEY,
    epoch       INTEGER NOT NULL,
    max_resumes INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;

-- Memoised steps: one row per (task, step name, occurrence), written once by
-- the attempt holding the epoch; seq is the order they were recorded in.
-- ok = 1: value is the JSON result; ok = 0: value is {"type", "message"}.
CREATE TABLE durable_steps (
    task_id     TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    occurrence  INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    ok          INTEGER NOT NULL,
    value       TEXT    NOT NULL,
    epoch       INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (task_id, name, occurrence)
) WITHOUT ROWID;
CREATE UNIQUE INDEX durable_steps_by_seq ON durable_steps (task_id, seq);
