"""The outbox: business rows in another database become exactly one task each."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chongming import ConfigurationError, Controller, TaskQuery
from chongming.controller.outbox import OutboxRelay, install_outbox, outbox_enqueue
from tests.stores.pg_support import DSN, drop_schema, fresh_name, require_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture
async def setup() -> AsyncIterator[tuple[Controller, Any, str]]:
    """A controller on a PostgreSQL store; a business "database" (a schema) with an outbox."""
    require_postgres()
    import asyncpg  # type: ignore[import-untyped]

    from chongming.stores.postgres import PostgresTaskStore

    store_schema, business = fresh_name("obs"), fresh_name("obb")
    pool = await asyncpg.create_pool(DSN, min_size=1, max_size=6)
    try:
        async with pool.acquire() as conn:
            await conn.execute(f'CREATE SCHEMA "{business}"')
            await install_outbox(conn, table=f"{business}.outbox")
        controller = Controller(store=PostgresTaskStore(DSN, schema=store_schema), owner="relay")
        async with controller:
            yield controller, pool, f"{business}.outbox"
            await controller.close(close_store=True)
    finally:
        await pool.close()
        await drop_schema(store_schema)
        await drop_schema(business)


async def _tasks(controller: Controller) -> dict[str | None, Any]:
    return {t.idempotency_key: t for t in await controller.list_tasks(TaskQuery())}


async def test_committed_rows_become_one_task_each_with_three_relays(
    setup: tuple[Controller, Any, str],
) -> None:
    controller, pool, table = setup
    rng = random.Random(5)
    committed: set[int] = set()
    async with pool.acquire() as conn:
        for n in range(300):
            transaction = conn.transaction()
            await transaction.start()
            row = await outbox_enqueue(conn, "ship", n, table=table, priority=n % 3, order=n)
            if rng.random() < 0.5:
                await transaction.commit()
                committed.add(row)
            else:
                await transaction.rollback()
    relays = [OutboxRelay(controller, pool, table=table, batch=17) for _ in range(3)]

    async def drain(relay: OutboxRelay) -> None:
        while await relay.relay_once():
            pass

    await asyncio.gather(*(drain(relay) for relay in relays))
    tasks = await _tasks(controller)
    assert set(tasks) == {f"outbox:{row}" for row in committed}
    assert sum(relay.published for relay in relays) == len(committed)  # none twice
    some = tasks[f"outbox:{min(committed)}"]
    assert some.name == "ship"
    assert some.kwargs == {"order": some.args[0]}
    assert some.priority == some.args[0] % 3


async def test_a_row_that_commits_late_is_not_skipped(setup: tuple[Controller, Any, str]) -> None:
    controller, pool, table = setup
    relay = OutboxRelay(controller, pool, table=table)
    async with pool.acquire() as early, pool.acquire() as late:
        slow = early.transaction()
        await slow.start()
        first = await outbox_enqueue(early, "ship", "early", table=table)  # lower id, still open
        async with late.transaction():
            second = await outbox_enqueue(late, "ship", "late", table=table)
        assert first < second
        assert await relay.relay_once() == 1  # only the committed one
        await slow.commit()
    assert await relay.relay_once() == 1  # the late committer is found: no cursor skipped it
    assert set(await _tasks(controller)) == {f"outbox:{first}", f"outbox:{second}"}


async def test_a_relay_that_dies_after_enqueueing_leaves_no_second_task(
    setup: tuple[Controller, Any, str],
) -> None:
    controller, pool, table = setup
    async with pool.acquire() as conn, conn.transaction():
        for n in range(5):
            await outbox_enqueue(conn, "ship", n, table=table)

    class Crash(Exception):
        pass

    original = controller.enqueue
    calls = 0

    async def enqueue_then_crash(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        result = await original(*args, **kwargs)
        if calls == 3:
            raise Crash  # the relay dies between the store's commit and marking the rows
        return result

    controller.enqueue = enqueue_then_crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await OutboxRelay(controller, pool, table=table).relay_once()
    controller.enqueue = original  # type: ignore[method-assign]
    assert len(await _tasks(controller)) == 3  # enqueued before the crash, rows still unpublished
    assert await OutboxRelay(controller, pool, table=table).relay_once() == 5
    assert len(await _tasks(controller)) == 5  # the first three were answered, not duplicated


async def test_bad_outbox_input_is_refused(setup: tuple[Controller, Any, str]) -> None:
    controller, pool, table = setup
    async with pool.acquire() as conn:
        with pytest.raises(ConfigurationError, match="inside your transaction"):
            await outbox_enqueue(conn, "ship", 1, table=table)
        async with conn.transaction():
            with pytest.raises(ConfigurationError, match="clashes"):
                await outbox_enqueue(conn, "ship", table=table, idempotency_key="x")
            with pytest.raises(ConfigurationError, match="identifier"):
                await outbox_enqueue(conn, "ship", table="x; drop table y")
    with pytest.raises(ConfigurationError, match="batch"):
        OutboxRelay(controller, pool, table=table, batch=0)
