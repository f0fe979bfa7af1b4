-- chongming PostgreSQL schema: cluster-wide rate limits.
-- "@schema" stands for the quoted schema name.
--
-- A rate limit caps how many tasks carrying a tag may start per period across
-- every node on this store (chongming/stores/rates.py). The limit is the
-- fleet's, stored once.
CREATE TABLE IF NOT EXISTS @schema.rate_limits (
    name       text PRIMARY KEY,
    rate       integer NOT NULL CHECK (rate > 0),
    per_s      double precision NOT NULL CHECK (per_s > 0),
    burst      integer NOT NULL CHECK (burst > 0),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per (limit, key): its theoretical arrival time (GCRA), in epoch
-- seconds by the server's clock. A grant locks the row (FOR UPDATE) and moves
-- it in the same statement, so grants of one key are decided one at a time.
CREATE TABLE IF NOT EXISTS @schema.rate_grants (
    name text NOT NULL,
    key  text NOT NULL,
    tat  double precision NOT NULL,
    PRIMARY KEY (name, key)
);
