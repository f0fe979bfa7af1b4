-- chongming PostgreSQL schema, migration 0008: the trace context an enqueue carried.
-- "@schema" stands for the quoted schema name.
--
-- One row per enqueued task that was enqueued inside a trace: the W3C carrier
-- (traceparent, tracestate) as a JSON object, written in the enqueue's own
-- transaction and read by the claim, so the attempt on another node continues
-- the enqueuer's trace. A side table, not a column: the task row and its codec
-- stay as they are, and a task enqueued outside any trace costs nothing here.
CREATE TABLE IF NOT EXISTS @schema.trace_carriers (
    task_id text  PRIMARY KEY,
    carrier jsonb NOT NULL
);
