-- chongming PostgreSQL schema, migration 0003: work for any node.
-- "@schema" stands for the quoted schema name.
--
-- A task enqueued by name carries its recipe (name, version, JSON arguments)
-- in its row; a worker claims it by writing itself as owner (FOR UPDATE SKIP
-- LOCKED). not_before holds it back until that time (the server's clock).
ALTER TABLE @schema.tasks ADD COLUMN IF NOT EXISTS version integer;
ALTER TABLE @schema.tasks ADD COLUMN IF NOT EXISTS not_before timestamptz;
ALTER TABLE @schema.tasks ADD COLUMN IF NOT EXISTS idempotency_key text;

-- The claim order: higher priority first, then first queued first, among the
-- queued tasks nobody holds. Partial, so it holds only the claimable rows.
CREATE INDEX IF NOT EXISTS tasks_claimable_idx
    ON @schema.tasks (priority DESC, queued_at, task_id COLLATE "C")
    WHERE status = 'queued' AND owner IS NULL;

-- An idempotency key lives as long as its task, with the digest of the input
-- it was given (name, version, arguments): a reuse with other input is refused.
CREATE TABLE IF NOT EXISTS @schema.idempotency_keys (
    idempotency_key text PRIMARY KEY,
    task_id         text NOT NULL,
    digest          text NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_keys_task_idx ON @schema.idempotency_keys (task_id);

-- What each worker serves ('name' or 'name@N'): how an enqueue pins a version
-- and how a task that no live worker serves is shown waiting.
ALTER TABLE @schema.nodes ADD COLUMN IF NOT EXISTS serves text[] NOT NULL DEFAULT '{}';
