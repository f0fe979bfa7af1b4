-- chongming PostgreSQL schema, migration 0002: one lease per node, command outcomes,
-- counts by (status, bucket, owner); the per-task supervisor lease goes away.
-- "@schema" stands for the quoted schema name.

-- A node: one controller with a store, under its owner name. One row per owner,
-- renewed as one UPDATE whatever the number of tasks the node holds; judged by
-- the server's clock.
CREATE TABLE IF NOT EXISTS @schema.nodes (
    owner            text        PRIMARY KEY,
    incarnation      text        NOT NULL,
    host             text        NOT NULL,
    pid              bigint      NOT NULL,
    version          text        NOT NULL,
    num_buckets      integer     NOT NULL,
    owned_buckets    integer[],
    started_at       timestamptz NOT NULL,
    renewed_at       timestamptz NOT NULL,
    lease_expires_at timestamptz NOT NULL
);

ALTER TABLE @schema.commands ADD COLUMN IF NOT EXISTS outcome text;
CREATE INDEX IF NOT EXISTS commands_created_idx
    ON @schema.commands (created_at, command_id COLLATE "C");
DROP INDEX IF EXISTS @schema.commands_task_idx;
CREATE INDEX IF NOT EXISTS commands_task_created_idx
    ON @schema.commands (task_id, created_at, command_id COLLATE "C");

-- task_counts: GROUP BY status, bucket, owner over this covering index.
CREATE INDEX IF NOT EXISTS tasks_counts_idx ON @schema.tasks (status, bucket, owner);

DROP INDEX IF EXISTS @schema.tasks_lease_idx;
ALTER TABLE @schema.tasks DROP COLUMN IF EXISTS lease_owner;
ALTER TABLE @schema.tasks DROP COLUMN IF EXISTS lease_expires_at;
