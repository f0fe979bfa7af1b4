-- chongming PostgreSQL schema, migration 0016: a park its fact already came for wakes.
-- "@schema" stands for the quoted schema name, "@queue_channel" for the
-- schema's queue NOTIFY channel.
--
-- A durable task waiting for a fact parks: queued, no owner, not_before its
-- deadline. The fact can come between the task's last look and the park
-- being written (a child that ends just then, a put_fact from elsewhere);
-- put_fact's wake then found the task still running. The parking node used
-- to wake it with a second call once the park was durable, so a node killed
-- between the two left the task asleep until its deadline (an hour for a
-- child). Now the park itself clears not_before, in its own row write, when a
-- fact it waits for is there: the same condition as put_fact's wake (more
-- "fact:<name>:deadline" steps than "fact:<name>" steps, and the fact stored).
CREATE OR REPLACE FUNCTION @schema.chongming_park_wake() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF EXISTS (
        SELECT 1 FROM @schema.durable_facts AS f
        WHERE f.task_id = NEW.task_id
          AND (SELECT count(*) FROM @schema.durable_steps
               WHERE task_id = NEW.task_id AND name = 'fact:' || f.name || ':deadline')
            > (SELECT count(*) FROM @schema.durable_steps
               WHERE task_id = NEW.task_id AND name = 'fact:' || f.name)
    ) THEN
        NEW.not_before := NULL;
        PERFORM pg_notify('@queue_channel', '');
    END IF;
    RETURN NEW;
END
$fn$;

DROP TRIGGER IF EXISTS tasks_park_wake ON @schema.tasks;
CREATE TRIGGER tasks_park_wake BEFORE UPDATE OF status ON @schema.tasks
FOR EACH ROW
WHEN (NEW.status = 'queued' AND NEW.owner IS NULL AND NEW.not_before IS NOT NULL)
EXECUTE FUNCTION @schema.chongming_park_wake();
