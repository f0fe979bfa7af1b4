-- chongming SQLite schema, migration 0004: cluster-wide limits.
--
-- A cluster limit caps how many tasks carrying a tag run at once across every
-- node on this file. The capacity is the fleet's, stored once.
CREATE TABLE cluster_limits (
    name       TEXT    NOT NULL PRIMARY KEY,
    capacity   INTEGER NOT NULL CHECK (capacity > 0),
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- The slots a node holds, one row per (limit, owner). A row counts only while
-- its node's lease is live (same owner and incarnation in nodes, lease not
-- expired by the store clock): a dead node's slots come back by themselves.
CREATE TABLE cluster_slots (
    name        TEXT    NOT NULL,
    owner       TEXT    NOT NULL,
    incarnation TEXT    NOT NULL,
    held        INTEGER NOT NULL CHECK (held > 0),
    PRIMARY KEY (name, owner)
) WITHOUT ROWID;
