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
--
-- Each side must see the other's commit. A BEFORE ROW trigger runs once the
-- row is locked, and its query reads what was committed by then. put_fact
-- already locks the task row before it stores the fact; a child's end did
-- not: its transaction and the parent's park could commit side by side, the
-- park not seeing the fact and the child's wake not seeing the park (seen in
-- the child kill proof: a parent parked for an hour with all six child
-- facts stored). So the child's end now locks the parent's row first: it
-- waits for a park in progress and then wakes it, or the park waits for the
-- child's commit and then finds the fact.
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

CREATE OR REPLACE FUNCTION @schema.chongming_child_end() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    fact_name text := 'child:' || NEW.task_id;
    woken integer;
BEGIN
    -- Child row, then parent row. Two group-commit batches that each park one
    -- parent and end a child of the other's could deadlock on this; the server
    -- then aborts one and the writer re-runs its writes one by one (writer.py).
    PERFORM 1 FROM @schema.tasks WHERE task_id = NEW.parent_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;  -- the parent is gone (pruned): nobody to tell
    END IF;
    INSERT INTO @schema.durable_facts (task_id, name, payload)
    VALUES (NEW.parent_id, fact_name,
            jsonb_build_object('status', NEW.status, 'result', NEW.result,
                               'failure', NEW.failure))
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
