-- chongming SQLite schema, migration 0003: work for any node.
--
-- A task enqueued by name carries its recipe (name, version, JSON arguments)
-- in its row; a worker claims it by writing itself as owner. not_before holds
-- it back until that time (microseconds, like every timestamp here).
ALTER TABLE tasks ADD COLUMN version INTEGER;
ALTER TABLE tasks ADD COLUMN not_before INTEGER;
ALTER TABLE tasks ADD COLUMN idempotency_key TEXT;

-- The claim order: higher priority first, then first queued first, among the
-- queued tasks nobody holds. Partial, so it holds only the claimable rows.
CREATE INDEX tasks_claimable ON tasks (priority DESC, queued_at, task_id)
    WHERE status = 'queued' AND owner IS NULL;

-- An idempotency key lives as long as its task: unique, and with the digest of
-- the input it was given (name, version, arguments) so a reuse with other
-- input is refused instead of silently answered with the first task.
CREATE TABLE idempotency_keys (
    idempotency_key TEXT NOT NULL PRIMARY KEY,
    task_id         TEXT NOT NULL,
    digest          TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_by_task ON idempotency_keys (task_id);

-- What each worker serves ('name' or 'name@N'), a JSON array: how an enqueue
-- pins a version and how a task that no live worker serves is shown waiting.
ALTER TABLE nodes ADD COLUMN serves TEXT NOT NULL DEFAULT '[]';
