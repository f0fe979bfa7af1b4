-- chongming SQLite schema, migration 0007: the operation ledger of durable tasks.
--
-- One row per (task, operation key): written 'started' (the intent) before the
-- operation runs, and 'done' with its result in the same transaction as the
-- caller's commit and the fencing check, so business writes in this database
-- happen exactly once per operation.
CREATE TABLE durable_effects (
    task_id    TEXT    NOT NULL,
    op_key     TEXT    NOT NULL,
    state      TEXT    NOT NULL CHECK (state IN ('started', 'done')),
    result     TEXT,
    epoch      INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    done_at    INTEGER,
    PRIMARY KEY (task_id, op_key)
) WITHOUT ROWID;
