"""The one column table: each dialect's schema holds exactly its columns, and every store
validates its settings with the same check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chongming.errors import ConfigurationError
from chongming.stores.columns import (
    IDENTITY_COLUMNS,
    LINK_COLUMNS,
    MUTABLE_COLUMNS,
    TASK_COLUMNS,
    Role,
)
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.sqlite import SqliteTaskStore
from tests.stores.pg_support import PgStoreFactory, admin_connection, require_postgres

_PG_TYPES = {"timestamptz": "timestamp with time zone"}


def test_every_column_has_one_role_and_the_key_comes_first() -> None:
    assert TASK_COLUMNS[0].role is Role.KEY
    assert [c for c in TASK_COLUMNS if c.role is Role.KEY] == [TASK_COLUMNS[0]]
    assert len(IDENTITY_COLUMNS) + len(MUTABLE_COLUMNS) + 1 == len(TASK_COLUMNS)
    # A state change writes these; they must never be skipped by a save.
    assert {"status", "status_version", "attempt", "owner", "result", "failure"} <= {
        c.name for c in MUTABLE_COLUMNS
    }


async def test_the_sqlite_schema_is_the_column_table() -> None:
    async with SqliteTaskStore(":memory:") as store:
        conn = store._writer_conn  # the schema as SQLite reports it
        assert conn is not None
        found = [(row[1], row[2]) for row in await conn.fetchall("PRAGMA table_info(tasks)")]
    links = [(name, sqlite) for name, sqlite, _ in LINK_COLUMNS]
    assert found == [(c.name, c.sqlite) for c in TASK_COLUMNS] + links


@pytest.mark.postgres
async def test_the_postgres_schema_is_the_column_table() -> None:
    factory = PgStoreFactory(require_postgres())
    try:
        store = factory.make()
        await store.open()
        async with admin_connection() as conn:
            rows = await conn.fetch(
                "SELECT attname, format_type(atttypid, atttypmod) AS type FROM pg_attribute"
                " WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped"
                " ORDER BY attnum",
                f'"{store.schema}".tasks',
            )
        found = [(row["attname"], row["type"]) for row in rows]
        expected = [(c.name, _PG_TYPES.get(c.postgres, c.postgres)) for c in TASK_COLUMNS]
        expected += [(name, postgres) for name, _, postgres in LINK_COLUMNS]
        assert found == expected
    finally:
        await factory.cleanup()


def _postgres(limit: Any) -> Any:
    pytest.importorskip("asyncpg")
    from chongming.stores.postgres import PostgresTaskStore

    return PostgresTaskStore("postgresql://u@127.0.0.1:1/db", max_payload_bytes=limit)


_STORES: list[Callable[[Any], Any]] = [
    lambda limit: InMemoryTaskStore(max_payload_bytes=limit),
    lambda limit: SqliteTaskStore(":memory:", max_payload_bytes=limit),
    _postgres,
]


@pytest.mark.parametrize("make", _STORES, ids=["memory", "sqlite", "postgres"])
@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "1000"])
def test_every_store_refuses_the_same_payload_limits(
    make: Callable[[Any], Any], limit: Any
) -> None:
    with pytest.raises(ConfigurationError, match="max_payload_bytes"):
        make(limit)


@pytest.mark.parametrize("make", _STORES, ids=["memory", "sqlite", "postgres"])
async def test_every_store_accepts_no_cap_and_a_positive_one(make: Callable[[Any], Any]) -> None:
    for limit in (None, 1, 1 << 20):
        await make(limit).close()
