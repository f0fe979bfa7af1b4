-- chongming SQLite schema, migration 0014: a park its fact already came for wakes.
--
-- A durable task waiting for a fact parks: queued, no owner, not_before its
-- deadline. The fact can come between the task's last look and the park
-- being written (a child that ends just then, a put_fact from another
-- process); put_fact's wake then found the task still running. The parking
-- node used to wake it with a second call once the park was durable, so a
-- node killed between the two left the task asleep until its deadline (an
-- hour for a child). Now the park's own transaction clears not_before when a
-- fact it waits for is there: the same condition as put_fact's wake (more
-- "fact:<name>:deadline" steps than "fact:<name>" steps, and the fact stored).
CREATE TRIGGER tasks_park_wake AFTER UPDATE OF status ON tasks
WHEN NEW.status = 'queued' AND NEW.owner IS NULL AND NEW.not_before IS NOT NULL
BEGIN
    UPDATE tasks SET not_before = NULL
    WHERE task_id = NEW.task_id
      AND EXISTS (
          SELECT 1 FROM durable_facts AS f
          WHERE f.task_id = NEW.task_id
            AND (SELECT count(*) FROM durable_steps
                 WHERE task_id = NEW.task_id AND name = 'fact:' || f.name || ':deadline')
              > (SELECT count(*) FROM durable_steps
                 WHERE task_id = NEW.task_id AND name = 'fact:' || f.name));
END;
