-- chongming PostgreSQL schema, migration 0006: facts for durable tasks.
-- "@schema" stands for the quoted schema name.
--
-- A fact is a set-once value sent to a task by name (a download finished, an
-- approval given). It is written before anything else it gates, so a waiter
-- that checks the store before each wait never misses one that came first.
CREATE TABLE IF NOT EXISTS @schema.durable_facts (
    task_id text NOT NULL,
    name    text NOT NULL,
    payload jsonb NOT NULL,
    key     text,
    sent_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, name)
);
