-- chongming PostgreSQL schema, migration 0004: cluster-wide limits.
-- "@schema" stands for the quoted schema name.
--
-- A cluster limit caps how many tasks carrying a tag run at once across every
-- node on this store. A lease locks the limit's row (FOR UPDATE), so leases of
-- one limit are decided one at a time; leases of different limits never wait.
CREATE TABLE IF NOT EXISTS @schema.cluster_limits (
    name       text PRIMARY KEY,
    capacity   integer NOT NULL CHECK (capacity > 0),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The slots a node holds, one row per (limit, owner). A row counts only while
-- its node's lease is live (same owner and incarnation in nodes, lease not
-- expired by the server's clock): a dead node's slots come back by themselves.
CREATE TABLE IF NOT EXISTS @schema.cluster_slots (
    name        text NOT NULL,
    owner       text NOT NULL,
    incarnation text NOT NULL,
    held        integer NOT NULL CHECK (held > 0),
    PRIMARY KEY (name, owner)
);
