-- chongming PostgreSQL schema, migration 0017: a task's end is announced.
-- "@schema" stands for the quoted schema name, "@end_channel" for the
-- schema's task-end NOTIFY channel.
--
-- QueuedTask.wait / .result on any node waits for a task to end. Each
-- terminal transition sends a NOTIFY on the end channel, delivered at commit
-- (never on a rollback); a waiter LISTENing there reads its task again at
-- once instead of at its next poll. The payload is empty, so a transaction
-- that ends a batch of tasks sends one notification (PostgreSQL folds equal
-- ones): the cost per drained task is this WHEN check and one function call.
-- A hint only: a waiter still polls at its controller's poll interval.
CREATE OR REPLACE FUNCTION @schema.chongming_task_end() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('@end_channel', '');
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS tasks_end_notify ON @schema.tasks;
CREATE TRIGGER tasks_end_notify AFTER UPDATE OF status ON @schema.tasks
FOR EACH ROW
WHEN (NEW.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded')
      AND OLD.status IS DISTINCT FROM NEW.status)
EXECUTE FUNCTION @schema.chongming_task_end();
