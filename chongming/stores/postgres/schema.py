"""The PostgreSQL schema: numbered migrations and the first-connect bootstrap.

Migrations are the files ``chongming/stores/sql/postgres_NNNN_<what>.sql``.

The bootstrap reads ``schema_version`` first and runs no DDL when the schema
is current, so a role without DDL rights can use tables someone else created.
DDL runs under a transaction-scoped advisory lock, so many processes may
connect for the first time at once.
"""

from __future__ import annotations

import dataclasses
import re
from importlib import resources
from typing import Any

from chongming.errors import ConfigurationError, SchemaError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SchemaState", "bootstrap", "quote_schema"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")

_FILE_NAME = re.compile(r"^postgres_(\d{4})_(\w+)\.sql$")
_SCHEMA_TOKEN = "@schema"
#: The schema's queue NOTIFY channel (a trigger that makes a task claimable notifies it).
_CHANNEL_TOKEN = "@queue_channel"
#: The schema's task-end NOTIFY channel (a terminal transition notifies it).
_END_CHANNEL_TOKEN = "@end_channel"


def _load() -> tuple[tuple[int, str], ...]:
    """The files ``chongming/stores/sql/postgres_NNNN_<what>.sql``, numbered 1..n."""
    folder = resources.files("chongming.stores").joinpath("sql")
    found = []
    for entry in folder.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text(encoding="utf-8")))
    found.sort()
    if [number for number, _ in found] != list(range(1, len(found) + 1)):
        raise SchemaError(f"PostgreSQL migrations are not numbered 1..n: {[n for n, _ in found]}")
    return tuple(found)


#: Each entry: (version, DDL with ``@schema`` standing for the quoted schema name).
MIGRATIONS: tuple[tuple[int, str], ...] = _load()
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
    #: May this role write trace carriers? A role granted its rights before
    #: migration 0008 made the table may not: its enqueues then go untraced.
    traces: bool = True


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
        " AND has_table_privilege($2, 'INSERT') AND has_table_privilege($3, 'UPDATE')"
        " AND has_table_privilege($4, 'INSERT') AND has_table_privilege($4, 'UPDATE')",
        f"{quoted}.tasks",
        f"{quoted}.transitions",
        f"{quoted}.commands",
        f"{quoted}.nodes",
    )
    traces = await conn.fetchval(
        "SELECT has_table_privilege($1, 'INSERT') AND has_table_privilege($1, 'UPDATE')",
        f"{quoted}.trace_carriers",
    )
    return SchemaState(
        version=version, migrated=migrated, writable=bool(writable), traces=bool(traces)
    )


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
                from chongming.stores.postgres.commands import channel_for

                channel = channel_for(schema + "/queue")
                ends = channel_for(schema + "/ends")
                ddl = ddl.replace(_CHANNEL_TOKEN, channel).replace(_END_CHANNEL_TOKEN, ends)
                ddl = ddl.replace(_SCHEMA_TOKEN, quoted)
                await conn.execute(ddl)
                await conn.execute(
                    f"INSERT INTO {quoted}.schema_version (version) VALUES ($1)", number
                )
                current = number
        return current
