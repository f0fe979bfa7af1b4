"""One durable-test fixture for both stores: a SQLite path, or a PostgreSQL schema of its own.

``where`` is the place; ``stores.make(where)`` gives what a ``Controller``
opens: the path itself (the controller opens and closes it), or a
PostgreSQL store that the fixture closes at the end of the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from chongming import Controller
from chongming.stores.base import TaskStore
from tests.conftest import FAST
from tests.stores.pg_support import drop_schema, fresh_name, require_postgres

__all__ = ["StoreMaker", "stores", "where"]


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    if request.param == "sqlite":
        yield tmp_path / "q.db"
        return
    dsn = require_postgres()
    schema = fresh_name("dur")
    try:
        yield (dsn, schema)
    finally:
        asyncio.run(drop_schema(schema))


class StoreMaker:
    def __init__(self) -> None:
        self.opened: list[TaskStore] = []

    def make(self, where: object) -> TaskStore | Path:
        if isinstance(where, Path):
            return where
        from chongming.stores.postgres import PostgresTaskStore

        assert isinstance(where, tuple)
        store = PostgresTaskStore(str(where[0]), schema=str(where[1]))
        self.opened.append(store)
        return store

    def one_slot_worker(self, where: object, register: Callable[[Controller], None]) -> Controller:
        """A worker with one slot that parks every durable wait at once (park_threshold=0)."""
        worker = Controller(
            store=self.make(where), owner="w-1", work=True, max_parallel=1, poll_interval=0.05,
            windows=FAST, park_threshold=0.0,
        )  # fmt: skip
        register(worker)
        return worker

    def client(self, where: object, register: Callable[[Controller], None]) -> Controller:
        """A client that looks at what it waits for every 50 ms (SQLite has no NOTIFY)."""
        client = Controller(store=self.make(where), owner="client", poll_interval=0.05)
        register(client)
        return client


@pytest.fixture
async def stores() -> AsyncIterator[StoreMaker]:
    maker = StoreMaker()
    yield maker
    while maker.opened:
        await maker.opened.pop().close()
