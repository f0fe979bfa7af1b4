-- chongming SQLite schema, migration 0013: child tasks (ctx.child / ctx.spawn).
--
-- A child task names its parent (parent_id, set once by link_child). When a
-- child reaches a terminal status, the trigger writes, in that same
-- transaction, the parent's fact "child:<child id>" with the child's status,
-- result and failure, and wakes the parent if it is parked waiting for that
-- fact (the same condition as put_fact's wake). Every path that ends a task
-- (a verdict, a stop, a cancel) goes through it.
ALTER TABLE tasks ADD COLUMN parent_id TEXT;

CREATE INDEX tasks_by_parent ON tasks (parent_id) WHERE parent_id IS NOT NULL;

CREATE TRIGGER tasks_child_end AFTER UPDATE OF status ON tasks
WHEN NEW.parent_id IS NOT NULL
 AND NEW.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded')
BEGIN
    INSERT OR IGNORE INTO durable_facts (task_id, name, payload, key, sent_at)
    SELECT NEW.parent_id, 'child:' || NEW.task_id,
           json_object('status', NEW.status, 'result', json(NEW.result),
                       'failure', json(NEW.failure)),
           NULL, NEW.updated_at
    WHERE EXISTS (SELECT 1 FROM tasks WHERE task_id = NEW.parent_id);
    UPDATE tasks SET not_before = NULL
    WHERE task_id = NEW.parent_id AND status = 'queued' AND owner IS NULL
      AND not_before IS NOT NULL
      AND (SELECT count(*) FROM durable_steps
           WHERE task_id = NEW.parent_id AND name = 'fact:child:' || NEW.task_id || ':deadline')
        > (SELECT count(*) FROM durable_steps
           WHERE task_id = NEW.parent_id AND name = 'fact:child:' || NEW.task_id);
END;
