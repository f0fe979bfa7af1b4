-- chongming SQLite schema, migration 0010: retention.
--
-- A prune picks terminal tasks by when they finished, oldest first. Partial,
-- so it holds only finished rows: a row gets its entry once, when it becomes
-- terminal, and the queue's hot rows never touch it.
CREATE INDEX tasks_finished ON tasks (finished_at)
    WHERE status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded');
