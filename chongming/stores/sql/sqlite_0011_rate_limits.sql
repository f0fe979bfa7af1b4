-- chongming SQLite schema: cluster-wide rate limits.
--
-- A rate limit caps how many tasks carrying a tag may start per period across
-- every node on this file (chongming/stores/rates.py). The limit is the
-- fleet's, stored once.
CREATE TABLE rate_limits (
    name       TEXT    NOT NULL PRIMARY KEY,
    rate       INTEGER NOT NULL CHECK (rate > 0),
    per_micros INTEGER NOT NULL CHECK (per_micros > 0),
    burst      INTEGER NOT NULL CHECK (burst > 0),
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- One row per (limit, key): its theoretical arrival time (GCRA), in seconds by
-- the store clock. A grant reads and moves it inside BEGIN IMMEDIATE.
CREATE TABLE rate_grants (
    name TEXT NOT NULL,
    key  TEXT NOT NULL,
    tat  REAL NOT NULL,
    PRIMARY KEY (name, key)
) WITHOUT ROWID;
