-- chongming PostgreSQL schema, migration 0011: retention.
-- "@schema" stands for the quoted schema name.
--
-- A prune picks terminal tasks by when they finished, oldest first, with
-- FOR UPDATE SKIP LOCKED. Partial, so it holds only finished rows: a row gets
-- its entry once, when it becomes terminal (an update that is not HOT anyway:
-- it writes status), and the queue's claimable rows never touch it.
CREATE INDEX IF NOT EXISTS tasks_finished_idx ON @schema.tasks (finished_at)
    WHERE status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded');
