-- chongming PostgreSQL schema, migration 0010: fewer index entries per task update.
-- "@schema" stands for the quoted schema name.
--
-- An update that changes an indexed column (every state change writes
-- status) is not HOT: it adds an entry to every index whose predicate holds
-- for the new row. So:
-- - tasks_status_idx goes: tasks_counts_idx (status, bucket, owner) leads with
--   status and serves every status filter.
-- - tasks_bucket_idx holds only tasks with a bucket, tasks_tags_idx only tasks
--   with tags: a filter on a bucket or a tag implies as much (the store's
--   queries say so), and a task without either costs those indexes nothing.
DROP INDEX IF EXISTS @schema.tasks_status_idx;

DROP INDEX IF EXISTS @schema.tasks_bucket_idx;
CREATE INDEX IF NOT EXISTS tasks_bucket_idx ON @schema.tasks (bucket) WHERE bucket IS NOT NULL;

DROP INDEX IF EXISTS @schema.tasks_tags_idx;
CREATE INDEX IF NOT EXISTS tasks_tags_idx ON @schema.tasks USING gin (tags) WHERE tags <> '{}';
