-- chongming PostgreSQL schema, migration 0009: the order durable steps were called in.
-- "@schema" stands for the quoted schema name.
--
-- seq is the order steps were recorded in, which is the order they finished
-- in: steps run at once (asyncio.gather) finish in any order. A step now also
-- records the step its flow of code called just before it (after_name,
-- after_occurrence; '' and 0 when it was the flow's first), and replay checks
-- that instead. Rows recorded before this migration have NULL there and are
-- replayed without an order check.
ALTER TABLE @schema.durable_steps
    ADD COLUMN IF NOT EXISTS after_name text,
    ADD COLUMN IF NOT EXISTS after_occurrence integer;
