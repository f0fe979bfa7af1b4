-- chongming SQLite schema, migration 0006: facts for durable tasks.
--
-- A fact is a set-once value sent to a task by name (a download finished, an
-- approval given). It is written before anything else it gates, so a waiter
-- that checks the store before each wait never misses one that came first.
CREATE TABLE durable_facts (
    task_id TEXT    NOT NULL,
    name    TEXT    NOT NULL,
    payload TEXT    NOT NULL,
    key     TEXT,
    sent_at INTEGER NOT NULL,
    PRIMARY KEY (task_id, name)
) WITHOUT ROWID;
