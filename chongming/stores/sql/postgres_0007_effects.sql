-- chongming PostgreSQL schema, migration 0007: the operation ledger of durable tasks.
-- "@schema" stands for the quoted schema name.
--
-- One row per (task, operation key): written 'started' (the intent) before the
-- operation runs, and 'done' with its result in the same transaction as the
-- caller's commit and the fencing check, so business writes in this database
-- happen exactly once per operation.
CREATE TABLE IF NOT EXISTS @schema.durable_effects (
    task_id    text NOT NULL,
    op_key     text NOT NULL,
    state      text NOT NULL CHECK (state IN ('started', 'done')),
    result     jsonb,
    epoch      integer NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    done_at    timestamptz,
    PRIMARY KEY (task_id, op_key)
);
