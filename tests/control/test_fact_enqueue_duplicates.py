"""``enqueue(facts=...)`` with an idempotency key: a duplicate changes nothing, on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chongming import Controller, InMemoryTaskStore
from chongming.errors import ConfigurationError
from chongming.stores.base import TaskStore
from tests.stores.pg_support import drop_schema, fresh_name, require_postgres


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore | Path]:
    if request.param == "memory":
        yield InMemoryTaskStore()
    elif request.param == "sqlite":
        yield tmp_path / "q.db"
    else:
        from chongming.stores.postgres import PostgresTaskStore

        schema = fresh_name("fdup")
        store = PostgresTaskStore(require_postgres(), schema=schema)
        try:
            yield store
        finally:
            await store.close()
            await drop_schema(schema)


async def test_a_duplicate_enqueue_writes_none_of_its_facts(place: TaskStore | Path) -> None:
    async with Controller(store=place, owner="client") as client:
        first = await client.enqueue(
            "waits", "x", task_id="t-1", idempotency_key="order-1", facts={"paid": True}
        )
        # The same key and input: the existing task, and its facts untouched,
        # whether the duplicate brings a new fact or another value of one it has.
        again = await client.enqueue(
            "waits", "x", idempotency_key="order-1", facts={"paid": False, "shipped": 1}
        )
        twice = await client.enqueue("waits", "x", idempotency_key="order-1", facts={"paid": True})
        facts = await client.facts("t-1")
    assert first.created is True
    assert (again.created, again.task_id, twice.created) == (False, "t-1", False)
    assert [(f.name, f.payload) for f in facts] == [("paid", True)]


async def test_facts_with_connection_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    import aiosqlite

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        await client.enqueue("waits", "x", task_id="t-1", idempotency_key="order-1")
        async with aiosqlite.connect(db) as conn:
            await conn.execute("BEGIN")
            with pytest.raises(ConfigurationError, match="facts= cannot join"):
                await client.enqueue(
                    "waits", "x", idempotency_key="order-1", connection=conn, facts={"paid": 1}
                )
            await conn.rollback()
        assert await client.facts("t-1") == []


async def test_the_facts_are_written_with_the_task_not_after_it(place: TaskStore | Path) -> None:
    """Was: ``put_fact`` after the enqueue; a crash between left the task without them."""
    async with Controller(store=place, owner="client") as client:
        store = client.store
        assert store is not None

        async def no_late_fact(fact: object) -> bool:
            raise AssertionError("a fact was sent after its task, not with it")

        store.put_fact = no_late_fact  # type: ignore[method-assign]
        queued = await client.enqueue("waits", "x", facts={"paid": True, "packed": 2})
        found = {fact.name: fact.payload for fact in await store.facts(queued.task_id)}
    assert found == {"paid": True, "packed": 2}
