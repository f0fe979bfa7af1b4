"""Enqueue inside the caller's own PostgreSQL transaction: the task exists iff it commits."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chongming import (
    ConfigurationError,
    Controller,
    IdempotencyConflict,
    TaskQuery,
    TaskStatus,
)
from tests.stores.pg_support import DSN, drop_schema, fresh_name, require_postgres

pytestmark = pytest.mark.postgres


async def trivial(ctx: Any, n: int) -> int:
    return n


@pytest.fixture
async def plane() -> AsyncIterator[tuple[Any, str]]:
    """A PostgreSQL store in its own schema, and a business table beside it."""
    require_postgres()
    import asyncpg  # type: ignore[import-untyped]

    from chongming.stores.postgres import PostgresTaskStore

    schema = fresh_name("txn")
    store = PostgresTaskStore(DSN, schema=schema)
    conn = await asyncpg.connect(DSN)
    try:
        await store.open()
        await conn.execute(f'CREATE TABLE "{schema}".orders (id int PRIMARY KEY)')
        yield store, schema
    finally:
        await conn.close()
        await store.close()
        await drop_schema(schema)


async def test_only_the_committed_half_exists_and_runs(plane: tuple[Any, str]) -> None:
    import asyncpg

    store, schema = plane
    rng = random.Random(11)
    committed: set[str] = set()
    conn = await asyncpg.connect(DSN)
    try:
        async with Controller(store=store, owner="web") as web:
            for n in range(1000):
                keep = rng.random() < 0.5
                transaction = conn.transaction()
                await transaction.start()
                await conn.execute(f'INSERT INTO "{schema}".orders (id) VALUES ($1)', n)
                queued = await web.enqueue("trivial", n, task_id=f"o-{n}", connection=conn)
                assert queued.created
                if keep:
                    await transaction.commit()
                    committed.add(f"o-{n}")
                else:
                    await transaction.rollback()
            stored = {t.task_id for t in await web.list_tasks(TaskQuery())}
            assert stored == committed
            assert await conn.fetchval(f'SELECT count(*) FROM "{schema}".orders') == len(committed)
            worker = Controller(store=store, owner="worker", work=True, max_parallel=200)
            worker.register("trivial", trivial)
            async with worker:
                for task_id in sorted(committed):
                    final = await web.get(task_id)
                    while not final.is_terminal:
                        await asyncio.sleep(0.01)
                        final = await web.get(task_id)
                    assert final.status is TaskStatus.SUCCEEDED
    finally:
        await conn.close()


async def test_a_duplicate_key_leaves_the_callers_transaction_usable(
    plane: tuple[Any, str],
) -> None:
    import asyncpg

    store, schema = plane
    conn = await asyncpg.connect(DSN)
    try:
        async with Controller(store=store, owner="web") as web:
            async with conn.transaction():
                await conn.execute(f'INSERT INTO "{schema}".orders (id) VALUES (1)')
                first = await web.enqueue("trivial", 1, idempotency_key="order-1", connection=conn)
                same = await web.enqueue("trivial", 1, idempotency_key="order-1", connection=conn)
                assert (first.created, same.created, same.task_id) == (True, False, first.task_id)
                with pytest.raises(IdempotencyConflict):
                    await web.enqueue("trivial", 2, idempotency_key="order-1", connection=conn)
                # still usable: the refused enqueue was undone to its savepoint only
                await conn.execute(f'INSERT INTO "{schema}".orders (id) VALUES (2)')
            assert await conn.fetchval(f'SELECT count(*) FROM "{schema}".orders') == 2
            assert [t.task_id for t in await web.list_tasks(TaskQuery())] == [first.task_id]
    finally:
        await conn.close()


async def test_a_connection_that_is_closed_or_outside_a_transaction_is_refused(
    plane: tuple[Any, str], tmp_path: Path
) -> None:
    import asyncpg

    store, _ = plane
    async with Controller(store=store, owner="web") as web:
        conn = await asyncpg.connect(DSN)
        with pytest.raises(ConfigurationError, match="not inside a transaction"):
            await web.enqueue("trivial", 1, connection=conn)
        await conn.close()
        with pytest.raises(ConfigurationError, match="closed"):
            await web.enqueue("trivial", 1, connection=conn)
        with pytest.raises(ConfigurationError, match="asyncpg connection"):
            await web.enqueue("trivial", 1, connection=object())
        assert await web.list_tasks(TaskQuery()) == []
    async with Controller(store=tmp_path / "q.db") as lite:
        with pytest.raises(ConfigurationError, match="PostgreSQL only"):
            await lite.enqueue("trivial", 1, connection=object())
