"""The PostgreSQL schema: numbered migrations and the first-connect bootstrap.

The bootstrap reads ``schema_version`` first and runs no DDL when the schema
is current, so a role without DDL rights can use tables someone else created.
DDL runs under a transaction-scoped advisory lock, so many processes may
connect for the first time at once.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from chongming.errors import ConfigurationError, SchemaError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SchemaState", "bootstrap", "quote_schema"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")

# Each entry: (version, DDL with {s} standing for the quoted schema name).
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
CREATE TABLE IF NOT EXISTS {s}.tasks (
    task_id           text        PRIMARY KEY,
    name              text        NOT NULL,
    label             text        NOT NULL,
    status            text        NOT NULL,
    status_version    integer     NOT NULL,
    attempt           integer     NOT NULL,
    max_attempts      integer     NOT NULL,
    bucket            integer,
    bucket_key        text,
    tags              text[]      NOT NULL DEFAULT '{{}}',
    priority          integer     NOT NULL DEFAULT 0,
    owner             text,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    queued_at         timestamptz,
    started_at        timestamptz,
    finished_at       timestamptz,
    last_heartbeat_at timestamptz,
    progress          jsonb,
    failure           jsonb,
    result            jsonb,
    args              jsonb       NOT NULL DEFAULT '[]',
    kwargs            jsonb       NOT NULL DEFAULT '{{}}',
    lease_owner       text,
    lease_expires_at  timestamptz
);
CREATE INDEX IF NOT EXISTS tasks_status_idx  ON {s}.tasks (status);
CREATE INDEX IF NOT EXISTS tasks_bucket_idx  ON {s}.tasks (bucket);
CREATE INDEX IF NOT EXISTS tasks_owner_idx   ON {s}.tasks (owner);
CREATE INDEX IF NOT EXISTS tasks_name_idx    ON {s}.tasks (name);
CREATE INDEX IF NOT EXISTS tasks_created_idx ON {s}.tasks (created_at, task_id COLLATE "C");
CREATE INDEX IF NOT EXISTS tasks_tags_idx    ON {s}.tasks USING gin (tags);
CREATE INDEX IF NOT EXISTS tasks_lease_idx   ON {s}.tasks (lease_expires_at)
    WHERE status NOT IN ('succeeded', 'failed', 'stopped', 'cancelled', 'skipped', 'lost');

CREATE TABLE IF NOT EXISTS {s}.transitions (
    task_id     text        NOT NULL,
    version     integer     NOT NULL,
    from_status text        NOT NULL,
    to_status   text        NOT NULL,
    at          timestamptz NOT NULL,
    trigger     text        NOT NULL,
    actor       text        NOT NULL,
    reason      text,
    attempt     integer     NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, version)
);

CREATE TABLE IF NOT EXISTS {s}.commands (
    command_id       text        PRIMARY KEY,
    task_id          text        NOT NULL,
    kind             text        NOT NULL,
    created_at       timestamptz NOT NULL,
    actor            text        NOT NULL,
    reason           text,
    target_owner     text,
    claimed_by       text,
    claim_token      text,
    lease_expires_at timestamptz,
    completed_at     timestamptz,
    completed_by     text
);
CREATE INDEX IF NOT EXISTS commands_open_idx ON {s}.commands (created_at, command_id COLLATE "C")
    WHERE completed_at IS NULL;
CREATE INDEX IF NOT EXISTS commands_task_idx ON {s}.commands (task_id);
""",
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1][0]

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.schema_version (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SchemaState:
    """What the bootstrap found: the version, and whether this role may write."""

    version: int
    migrated: bool
    writable: bool


def quote_schema(schema: str) -> str:
    """A quoted identifier; refuse names that would need more than quoting."""
    if not isinstance(schema, str) or not _IDENTIFIER.fullmatch(schema):
        raise ConfigurationError(
            f"schema must be a plain SQL identifier (letters, digits, _), got {schema!r}"
        )
    if len(schema.encode()) > 63:
        raise ConfigurationError(f"schema name longer than 63 bytes: {schema!r}")
    return f'"{schema}"'


async def bootstrap(conn: Any, schema: str) -> SchemaState:
    """Create or migrate the schema if needed; never run DDL when it is current."""
    quoted = quote_schema(schema)
    version = await _stored_version(conn, schema, quoted)
    migrated = False
    if version is None or version < SCHEMA_VERSION:
        version = await _migrate(conn, schema, quoted)
        migrated = True
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"schema {schema!r} is at version {version}, newer than this chongming "
            f"understands ({SCHEMA_VERSION}); upgrade chongming, never downgrade the schema"
        )
    writable = await conn.fetchval(
        "SELECT has_table_privilege($1, 'INSERT') AND has_table_privilege($1, 'UPDATE')"
        " AND has_table_privilege($2, 'INSERT') AND has_table_privilege($3, 'UPDATE')",
        f"{quoted}.tasks",
        f"{quoted}.transitions",
        f"{quoted}.commands",
    )
    return SchemaState(version=version, migrated=migrated, writable=bool(writable))


async def _stored_version(conn: Any, schema: str, quoted: str) -> int | None:
    exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{quoted}.schema_version")
    if not exists:
        return None
    value = await conn.fetchval(f"SELECT max(version) FROM {quoted}.schema_version")
    return None if value is None else int(value)


async def _migrate(conn: Any, schema: str, quoted: str) -> int:
    can_create = await conn.fetchval(
        "SELECT CASE WHEN n.oid IS NULL THEN has_database_privilege(current_database(), 'CREATE')"
        " ELSE has_schema_privilege(n.oid, 'CREATE') END"
        " FROM (SELECT 1) AS one LEFT JOIN pg_namespace n ON n.nspname = $1",
        schema,
    )
    if not can_create:
        raise SchemaError(
            f"schema {schema!r} is missing or older than version {SCHEMA_VERSION}, and this "
            "role has no right to create it; run chongming once with a role that has DDL "
            "rights (then this role can use it read-only or read-write as granted)"
        )
    async with conn.transaction():
        # Serialise first connects: CREATE ... IF NOT EXISTS races on the catalog.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"chongming:{schema}")
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
        await conn.execute(_VERSION_TABLE.format(s=quoted))
        current = await conn.fetchval(f"SELECT max(version) FROM {quoted}.schema_version")
        current = 0 if current is None else int(current)
        for number, ddl in MIGRATIONS:
            if number > current:
                await conn.execute(ddl.format(s=quoted))
                await conn.execute(
                    f"INSERT INTO {quoted}.schema_version (version) VALUES ($1)", number
                )
                current = number
        return current
