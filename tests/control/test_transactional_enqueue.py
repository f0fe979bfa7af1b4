"""Enqueue inside the caller's own transaction: the task exists iff it commits.

On PostgreSQL the caller passes its asyncpg connection; on SQLite an
aiosqlite connection on the store's file. The same proofs run on both.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from chongming import (
    ConfigurationError,
    Controller,
    IdempotencyConflict,
    TaskQuery,
    TaskStatus,
)
from chongming.errors import StoreBusy
from chongming.stores import InMemoryTaskStore
from chongming.stores.base import TaskStore
from chongming.stores.sqlite import SqliteTaskStore
from tests.stores.pg_support import DSN, drop_schema, fresh_name, require_postgres

DEADLINE = 60.0


async def trivial(ctx: Any, n: int) -> int:
    return n


class Business:
    """The caller's side: one connection, an ``orders`` table beside the store's tables."""

    def __init__(self, connection: Any, table: str, placeholder: str) -> None:
        self.connection = connection
        self._table = table
        self._insert = f"INSERT INTO {table} (id) VALUES ({placeholder})"

    async def begin(self) -> None:
        raise NotImplementedError

    async def commit(self) -> None:
        raise NotImplementedError

    async def rollback(self) -> None:
        raise NotImplementedError

    async def insert(self, n: int) -> None:
        await self.connection.execute(self._insert, (n,))

    async def count(self) -> int:
        raise NotImplementedError


class SqliteBusiness(Business):
    async def begin(self) -> None:
        await self.connection.execute("BEGIN IMMEDIATE")

    async def commit(self) -> None:
        await self.connection.execute("COMMIT")

    async def rollback(self) -> None:
        await self.connection.execute("ROLLBACK")

    async def count(self) -> int:
        rows = list(await self.connection.execute_fetchall(f"SELECT count(*) FROM {self._table}"))
        return int(rows[0][0])


class PostgresBusiness(Business):
    _transaction: Any = None

    async def begin(self) -> None:
        self._transaction = self.connection.transaction()
        await self._transaction.start()

    async def commit(self) -> None:
        await self._transaction.commit()

    async def rollback(self) -> None:
        await self._transaction.rollback()

    async def insert(self, n: int) -> None:
        await self.connection.execute(self._insert, n)

    async def count(self) -> int:
        return int(await self.connection.fetchval(f"SELECT count(*) FROM {self._table}"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def plane(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[TaskStore, Business]]:
    """A store, and the caller's connection on the same database with a business table."""
    if request.param == "sqlite":
        path = tmp_path / "shop.db"
        store: TaskStore = SqliteTaskStore(path)
        await store.open()
        conn = await aiosqlite.connect(path, isolation_level=None)
        try:
            await conn.execute("PRAGMA synchronous = NORMAL")  # the test's commits need no fsync
            await conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
            yield store, SqliteBusiness(conn, "orders", "?")
        finally:
            await conn.close()
            await store.close()
        return
    require_postgres()
    import asyncpg  # type: ignore[import-untyped]

    from chongming.stores.postgres import PostgresTaskStore

    schema = fresh_name("txn")
    store = PostgresTaskStore(DSN, schema=schema)
    pg = await asyncpg.connect(DSN)
    try:
        await store.open()
        await pg.execute(f'CREATE TABLE "{schema}".orders (id int PRIMARY KEY)')
        yield store, PostgresBusiness(pg, f'"{schema}".orders', "$1")
    finally:
        await pg.close()
        await store.close()
        await drop_schema(schema)


async def wait_all_succeeded(web: Controller, task_ids: set[str]) -> None:
    async with asyncio.timeout(DEADLINE):
        for task_id in sorted(task_ids):
            final = await web.get(task_id)
            while not final.is_terminal:
                await asyncio.sleep(0.01)
                final = await web.get(task_id)
            assert final.status is TaskStatus.SUCCEEDED, final


async def test_only_the_committed_half_exists_and_runs(
    plane: tuple[TaskStore, Business],
) -> None:
    store, business = plane
    rng = random.Random(11)
    committed: set[str] = set()
    async with Controller(store=store, owner="web") as web:
        for n in range(1000):
            keep = rng.random() < 0.5
            await business.begin()
            await business.insert(n)
            queued = await web.enqueue(
                "trivial", n, task_id=f"o-{n}", connection=business.connection
            )
            assert queued.created
            if keep:
                await business.commit()
                committed.add(f"o-{n}")
            else:
                await business.rollback()
        assert 400 < len(committed) < 600
        stored = {t.task_id for t in await web.list_tasks(TaskQuery())}
        assert stored == committed
        assert await business.count() == len(committed)
        first = sorted(committed)[0]
        assert [t.trigger for t in await web.history(first)] == ["orchestrator:enqueued"]
        worker = Controller(store=store, owner="worker", work=True, max_parallel=200)
        worker.register("trivial", trivial)
        async with worker:
            await wait_all_succeeded(web, committed)


async def test_a_duplicate_key_leaves_the_callers_transaction_usable(
    plane: tuple[TaskStore, Business],
) -> None:
    store, business = plane
    conn = business.connection
    async with Controller(store=store, owner="web") as web:
        await business.begin()
        await business.insert(1)
        first = await web.enqueue("trivial", 1, idempotency_key="order-1", connection=conn)
        same = await web.enqueue("trivial", 1, idempotency_key="order-1", connection=conn)
        assert (first.created, same.created, same.task_id) == (True, False, first.task_id)
        assert same.snapshot == first.snapshot
        with pytest.raises(IdempotencyConflict):
            await web.enqueue("trivial", 2, idempotency_key="order-1", connection=conn)
        # still usable: the refused enqueue was undone to its savepoint only
        await business.insert(2)
        await business.commit()
        assert await business.count() == 2
        assert [t.task_id for t in await web.list_tasks(TaskQuery())] == [first.task_id]
        assert await web.get(first.task_id) == first.snapshot  # returned as it was written
        # after the commit the key answers outside any transaction too
        again = await web.enqueue("trivial", 1, idempotency_key="order-1")
        assert (again.created, again.task_id) == (False, first.task_id)


async def test_a_connection_that_is_closed_or_outside_a_transaction_is_refused(
    plane: tuple[TaskStore, Business],
) -> None:
    store, business = plane
    conn = business.connection
    kind = "aiosqlite" if isinstance(store, SqliteTaskStore) else "asyncpg"
    async with Controller(store=store, owner="web") as web:
        with pytest.raises(ConfigurationError, match="not inside a transaction"):
            await web.enqueue("trivial", 1, connection=conn)
        with pytest.raises(ConfigurationError, match=f"{kind} connection"):
            await web.enqueue("trivial", 1, connection=object())
        await conn.close()
        with pytest.raises(ConfigurationError, match="closed"):
            await web.enqueue("trivial", 1, connection=conn)
        assert await web.list_tasks(TaskQuery()) == []


async def test_the_memory_store_has_no_transaction_to_join() -> None:
    async with Controller(store=InMemoryTaskStore()) as client:
        with pytest.raises(ConfigurationError, match="no transaction to join"):
            await client.enqueue("trivial", 1, connection=object())


# -- SQLite only -------------------------------------------------------------------------


async def test_sqlite_refuses_another_file_a_sync_connection_and_a_store_in_memory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tasks.db"
    async with (
        Controller(store=path, owner="web") as web,
        aiosqlite.connect(tmp_path / "other.db", isolation_level=None) as other,
    ):
        await other.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        await other.execute("BEGIN IMMEDIATE")
        await other.execute("INSERT INTO orders VALUES (1)")
        with pytest.raises(ConfigurationError, match="not on the store's file"):
            await web.enqueue("trivial", 1, connection=other)
        await other.execute("INSERT INTO orders VALUES (2)")  # the transaction is untouched
        await other.execute("COMMIT")
        assert list(await other.execute_fetchall("SELECT count(*) FROM orders")) == [(2,)]
        sync = sqlite3.connect(path)
        try:
            with pytest.raises(ConfigurationError, match=r"not a sqlite3\.Connection"):
                await web.enqueue("trivial", 1, connection=sync)
        finally:
            sync.close()
        assert await web.list_tasks(TaskQuery()) == []
    async with (
        Controller(store=":memory:") as lite,
        aiosqlite.connect(":memory:", isolation_level=None) as memory,
    ):
        await memory.execute("BEGIN")
        with pytest.raises(ConfigurationError, match="not on the store's file"):
            await lite.enqueue("trivial", 1, connection=memory)


async def test_sqlite_a_transaction_that_cannot_take_the_write_lock_gets_store_busy(
    tmp_path: Path,
) -> None:
    """A deferred transaction that read before another writer committed cannot write any
    more (WAL): the enqueue is refused, typed, with nothing of it left in the transaction."""
    path = tmp_path / "tasks.db"
    async with (
        Controller(store=path, owner="web") as web,
        aiosqlite.connect(path, isolation_level=None) as conn,
    ):
        await conn.execute("BEGIN")  # deferred: no lock until its first write
        assert list(await conn.execute_fetchall("SELECT count(*) FROM tasks")) == [(0,)]
        await web.enqueue("trivial", 0, task_id="outside")  # the store's writer commits
        with pytest.raises(StoreBusy, match="BEGIN IMMEDIATE"):
            await web.enqueue("trivial", 1, task_id="inside", connection=conn)
        rows = await conn.execute_fetchall("SELECT task_id FROM tasks")
        assert list(rows) == []  # its snapshot still predates "outside"; "inside" is not there
        await conn.execute("ROLLBACK")
        assert [t.task_id for t in await web.list_tasks(TaskQuery())] == ["outside"]


async def test_sqlite_a_cancelled_enqueue_is_wholly_in_the_transaction_or_not_at_all(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tasks.db"
    async with (
        Controller(store=path, owner="web") as web,
        aiosqlite.connect(path, isolation_level=None) as conn,
    ):
        for round_ in range(20):
            await conn.execute("BEGIN IMMEDIATE")
            enqueue = asyncio.ensure_future(
                web.enqueue(
                    "trivial",
                    round_,
                    task_id=f"c-{round_}",
                    idempotency_key=f"c-{round_}",
                    connection=conn,
                )
            )
            for _ in range(round_):  # cancel at a different point each round
                await asyncio.sleep(0)
            enqueue.cancel()
            try:
                await enqueue
            except asyncio.CancelledError:
                pass
            counts = []
            for table in ("tasks", "transitions", "idempotency_keys"):
                rows = await conn.execute_fetchall(f"SELECT count(*) FROM {table}")
                counts.append(next(iter(rows))[0])
            assert counts in ([0, 0, 0], [1, 1, 1]), (round_, counts)
            await conn.execute("ROLLBACK")  # still a transaction to end: usable
        assert await web.list_tasks(TaskQuery()) == []


async def test_sqlite_an_in_process_worker_takes_the_task_at_the_commit(tmp_path: Path) -> None:
    """The enqueue wakes this process's worker; its claim waits for the write lock the
    caller's transaction holds, so it runs the task at the commit, not at its next poll."""
    path = tmp_path / "tasks.db"
    node = Controller(store=path, owner="node", work=True, poll_interval=30.0)
    node.register("trivial", trivial)
    async with node, aiosqlite.connect(path, isolation_level=None) as conn:
        await asyncio.sleep(0.2)  # the claim loop's first look is over: it now polls every 30 s
        await conn.execute("BEGIN IMMEDIATE")
        queued = await node.enqueue("trivial", 7, connection=conn)
        await asyncio.sleep(0.2)
        await conn.execute("COMMIT")
        committed = time.monotonic()
        async with asyncio.timeout(10):  # the 30 s poll would miss it
            while not (final := await queued.get()).is_terminal:
                await asyncio.sleep(0.01)
        assert final.status is TaskStatus.SUCCEEDED
        assert time.monotonic() - committed < 5


async def test_sqlite_the_version_pin_never_waits_for_the_stores_writer(tmp_path: Path) -> None:
    """Reading what workers serve is a write on SQLite, which would queue behind the
    caller's own lock: inside a transaction the last view is used, without waiting."""
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path, busy_timeout=30.0)  # a wait for the lock would show
    worker = Controller(store=path, owner="worker", work=True)
    worker.register("trivial", trivial, version=3)
    web = Controller(store=store, owner="web", poll_interval=0.05)
    async with worker, web, aiosqlite.connect(path, isolation_level=None) as conn:
        outside = await web.enqueue("trivial", 0)  # reads the view: trivial@3 is served
        assert outside.snapshot.version == 3
        for n in range(3):
            await asyncio.sleep(0.1)  # the view is stale now
            await conn.execute("BEGIN IMMEDIATE")
            started = time.monotonic()
            inside = await web.enqueue("trivial", n, connection=conn)
            assert time.monotonic() - started < 2.0
            assert inside.snapshot.version == 3
            await conn.execute("COMMIT")
            assert (await inside.wait(timeout=10)).status is TaskStatus.SUCCEEDED
        await web.close(close_store=True)
