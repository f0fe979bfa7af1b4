-- chongming PostgreSQL schema, migration 0015: the owner index holds owned rows only.
-- "@schema" stands for the quoted schema name.
--
-- A claim asks for queued rows with no owner in claim order, which
-- tasks_claimable_idx answers by reading its first entries. On a table whose
-- statistics say nothing is queued (a million terminal rows analysed, then a
-- burst of enqueues) the planner may estimate one claimable row and take the
-- whole-table owner index for "owner IS NULL" instead, then sort every
-- queued row for each claim: a claim that costs as much as the queue is long
-- (3.9 ms per claim with 2,000 queued beside a million terminal rows, 1.0 ms
-- once the queue had drained, measured). Every query by owner names one
-- (owner = $1), so the owner index needs only the owned rows, and "owner IS
-- NULL" can only be answered by the claim index.
DROP INDEX IF EXISTS @schema.tasks_owner_idx;
CREATE INDEX IF NOT EXISTS tasks_owner_idx ON @schema.tasks (owner) WHERE owner IS NOT NULL;
