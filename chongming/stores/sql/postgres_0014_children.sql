-- chongming PostgreSQL schema, migration 0014: child tasks (ctx.child / ctx.spawn).
-- "@schema" stands for the quoted schema name, "@queue_channel" for the
-- schema's queue NOTIFY channel (a woken parent is a claimable task).
--
-- A child task names its parent (parent_id, set once by link_child). When a
-- child reaches a terminal status, the trigger writes, in that same
-- transaction, the parent's fact "child:<child id>" with the child's status,
-- result and failure, and wakes the parent if it is parked waiting for that
-- fact (the same condition as put_fact's wake). Every path that ends a task
-- (a verdict, a stop, a cancel) goes through it.
ALTER TABLE @schema.tasks ADD COLUMN IF NOT EXISTS parent_id text;

CREATE INDEX IF NOT EXISTS tasks_by_parent ON @schema.tasks (parent_id)
    WHERE parent_id IS NOT NULL;

CREATE OR REPLACE FUNCTION @schema.chongming_child_end() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    fact_name text := 'child:' || NEW.task_id;
    woken integer;
BEGIN
    INSERT INTO @schema.durable_facts (task_id, name, payload)
    SELECT NEW.parent_id, fact_name,
           jsonb_build_object('status', NEW.status, 'result', NEW.result,
                              'failure', NEW.failure)
    WHERE EXISTS (SELECT 1 FROM @schema.tasks WHERE task_id = NEW.parent_id)
    ON CONFLICT (task_id, name) DO NOTHING;
    UPDATE @schema.tasks SET not_before = NULL
    WHERE task_id = NEW.parent_id AND status = 'queued' AND owner IS NULL
      AND not_before IS NOT NULL
      AND (SELECT count(*) FROM @schema.durable_steps
           WHERE task_id = NEW.parent_id AND name = 'fact:' || fact_name || ':deadline')
        > (SELECT count(*) FROM @schema.durable_steps
           WHERE task_id = NEW.parent_id AND name = 'fact:' || fact_name);
    GET DIAGNOSTICS woken = ROW_COUNT;
    IF woken > 0 THEN
        PERFORM pg_notify('@queue_channel', '');
    END IF;
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS tasks_child_end ON @schema.tasks;
CREATE TRIGGER tasks_child_end AFTER UPDATE OF status ON @schema.tasks
FOR EACH ROW
WHEN (NEW.parent_id IS NOT NULL
      AND NEW.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded'))
EXECUTE FUNCTION @schema.chongming_child_end();
