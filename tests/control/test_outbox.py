"""The outbox: business rows in another database become exactly one task each."""

from __future__ import annotations

import asyncio
import json
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
    with pytest.raises(Crash):  # one at a time: the crash comes before rows 4 and 5
        await OutboxRelay(controller, pool, table=table, concurrency=1).relay_once()
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
    with pytest.raises(ConfigurationError, match="concurrency"):
        OutboxRelay(controller, pool, table=table, concurrency=0)


async def _row(pool: Any, table: str, row: int) -> Any:
    async with pool.acquire() as conn:
        return await conn.fetchrow(
            f"SELECT published_at, error FROM {_quoted(table)} WHERE id = $1", row
        )


def _quoted(table: str) -> str:
    return ".".join(f'"{part}"' for part in table.split("."))


async def test_a_row_that_can_never_be_a_task_does_not_hold_up_the_others(
    setup: tuple[Controller, Any, str],
) -> None:
    """A refused row is set aside with its error; the rows around it still move."""
    controller, pool, table = setup
    await controller.enqueue("ship", "already", task_id="taken")
    async with pool.acquire() as conn, conn.transaction():
        before = await outbox_enqueue(conn, "ship", 1, table=table)
        clash = await outbox_enqueue(conn, "ship", 2, table=table, task_id="taken")
        squatted = await outbox_enqueue(conn, "ship", 3, table=table)
        after = await outbox_enqueue(conn, "ship", 4, table=table)
    # Another business database relaying under the same prefix got there first.
    await controller.enqueue("other", idempotency_key=f"outbox:{squatted}")
    relay = OutboxRelay(controller, pool, table=table)
    assert await relay.relay_once() == 4
    assert (relay.published, relay.refused) == (2, 2)
    tasks = await _tasks(controller)
    assert tasks[f"outbox:{before}"].args == (1,)
    assert tasks[f"outbox:{after}"].args == (4,)
    assert f"outbox:{clash}" not in tasks
    assert tasks[f"outbox:{squatted}"].name == "other"  # not answered with another's task
    for row, reason in ((clash, "DuplicateTaskId"), (squatted, "IdempotencyConflict")):
        stored = await _row(pool, table, row)
        assert stored["published_at"] is None
        assert stored["error"].startswith(reason), stored["error"]
    assert await relay.relay_once() == 0  # set aside: not taken again round after round


async def test_a_replay_after_a_new_version_went_live_answers_the_first_task(
    setup: tuple[Controller, Any, str],
) -> None:
    """Enqueued unversioned, the relay dies; a worker of ship@2 appears; the replay pins @2.

    The replay's input then differs from the first enqueue's only by the pin:
    it is the same row, so it gets the task it already has (no conflict that
    would hold the batch forever, no second task).
    """
    from chongming.stores.nodes import NodeInfo

    controller, pool, table = setup
    assert controller.store is not None
    async with pool.acquire() as conn, conn.transaction():
        rows = [await outbox_enqueue(conn, "ship", n, table=table) for n in range(3)]
    original = controller.enqueue

    async def enqueue_all_then_die(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        if kwargs["idempotency_key"] == f"outbox:{rows[-1]}":
            raise ConnectionResetError  # after the store committed, before the outbox did
        return result

    controller.enqueue = enqueue_all_then_die  # type: ignore[method-assign]
    with pytest.raises(ConnectionResetError):
        await OutboxRelay(controller, pool, table=table).relay_once()
    controller.enqueue = original  # type: ignore[method-assign]
    info = NodeInfo(
        owner="worker-v2",
        incarnation="i",
        host="h",
        pid=1,
        version="0",
        num_buckets=1,
        serves=frozenset({"ship@2"}),
    )
    await controller.store.register_node(info, ttl_seconds=60)
    async with Controller(store=controller.store, owner="relay-2") as later:
        relay = OutboxRelay(later, pool, table=table)
        assert await relay.relay_once() == 3
        assert (relay.published, relay.replayed, relay.refused) == (3, 3, 0)
        fresh = await later.enqueue("ship", 9)
        assert fresh.snapshot.version == 2  # the pin is live for new work
        await later.close(close_store=False)
    tasks = await _tasks(controller)
    assert [tasks[f"outbox:{row}"].version for row in rows] == [None, None, None]
    for row in rows:
        assert (await _row(pool, table, row))["published_at"] is not None


async def test_rows_are_json_whatever_codec_the_pool_has() -> None:
    """A pool that decodes jsonb itself (a common asyncpg setup) writes and reads the same rows."""
    require_postgres()
    import asyncpg

    from chongming.stores.postgres import PostgresTaskStore

    async def with_codec(conn: Any) -> None:
        await conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )

    store_schema, business = fresh_name("obs"), fresh_name("obb")
    table = f"{business}.outbox"
    pool = await asyncpg.create_pool(DSN, min_size=1, max_size=2, init=with_codec)
    try:
        async with pool.acquire() as conn:
            await conn.execute(f'CREATE SCHEMA "{business}"')
            await install_outbox(conn, table=table)
            async with conn.transaction():
                row = await outbox_enqueue(conn, "ship", [1, 2], table=table, to="x")
            kinds = await conn.fetchrow(
                f"SELECT jsonb_typeof(args) AS args, jsonb_typeof(kwargs) AS kwargs"
                f" FROM {_quoted(table)} WHERE id = $1",
                row,
            )
        assert (kinds["args"], kinds["kwargs"]) == ("array", "object")
        store = PostgresTaskStore(DSN, schema=store_schema)
        async with Controller(store=store, owner="relay") as controller:
            assert await OutboxRelay(controller, pool, table=table).relay_once() == 1
            task = (await _tasks(controller))[f"outbox:{row}"]
            await controller.close(close_store=True)
        assert (task.args, task.kwargs) == (([1, 2],), {"to": "x"})
    finally:
        await pool.close()
        await drop_schema(store_schema)
        await drop_schema(business)


async def test_closing_lets_the_batch_in_progress_finish(
    setup: tuple[Controller, Any, str],
) -> None:
    """``aclose`` stops between batches: a batch half-enqueued is committed, not cancelled."""
    controller, pool, table = setup
    async with pool.acquire() as conn, conn.transaction():
        rows = [await outbox_enqueue(conn, "ship", n, table=table) for n in range(3)]
    original = controller.enqueue
    inside, release = asyncio.Event(), asyncio.Event()

    async def slow_enqueue(*args: Any, **kwargs: Any) -> Any:
        if kwargs["idempotency_key"] == f"outbox:{rows[1]}":
            inside.set()
            await release.wait()
        return await original(*args, **kwargs)

    controller.enqueue = slow_enqueue  # type: ignore[method-assign]
    relay = OutboxRelay(controller, pool, table=table, poll_interval=0.01)
    relay.start()
    await asyncio.wait_for(inside.wait(), 10)
    closing = asyncio.create_task(relay.aclose())
    await asyncio.sleep(0.05)
    assert not closing.done()  # it waits for the batch...
    release.set()
    await asyncio.wait_for(closing, 10)
    controller.enqueue = original  # type: ignore[method-assign]
    assert relay.published == 3  # ...which committed
    for row in rows:
        assert (await _row(pool, table, row))["published_at"] is not None


async def test_a_relay_runs_as_a_context_manager(setup: tuple[Controller, Any, str]) -> None:
    controller, pool, table = setup
    async with pool.acquire() as conn, conn.transaction():
        row = await outbox_enqueue(conn, "ship", 1, table=table)
    async with OutboxRelay(controller, pool, table=table, poll_interval=0.01) as relay:
        relay.start()  # a second start does nothing
        while not relay.published:
            await asyncio.sleep(0.01)
    assert set(await _tasks(controller)) == {f"outbox:{row}"}


async def test_a_batch_keeps_at_most_concurrency_enqueues_in_flight(
    setup: tuple[Controller, Any, str],
) -> None:
    controller, pool, table = setup
    async with pool.acquire() as conn, conn.transaction():
        for n in range(20):
            await outbox_enqueue(conn, "ship", n, table=table)
    original = controller.enqueue
    in_flight = most = 0
    four = asyncio.Event()

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        if in_flight == 4:
            four.set()
        try:
            await asyncio.wait_for(four.wait(), 10)  # one at a time would never get here
            return await original(*args, **kwargs)
        finally:
            in_flight -= 1

    controller.enqueue = counting  # type: ignore[method-assign]
    relay = OutboxRelay(controller, pool, table=table, concurrency=4)
    assert await relay.relay_once() == 20
    controller.enqueue = original  # type: ignore[method-assign]
    assert most == 4
    assert len(await _tasks(controller)) == 20


async def test_a_relay_whose_controller_closed_stops(setup: tuple[Controller, Any, str]) -> None:
    controller, pool, table = setup
    async with pool.acquire() as conn, conn.transaction():
        await outbox_enqueue(conn, "ship", 1, table=table)
    client = Controller(store=controller.store, owner="closed-client")
    await client.start()
    await client.close(close_store=False)
    relay = OutboxRelay(client, pool, table=table, poll_interval=0.01)
    relay.start()
    task = relay._relay.task
    assert task is not None
    await asyncio.wait_for(asyncio.shield(task), 10)  # it ended by itself, not looping on errors
    await relay.aclose()
    assert relay.published == 0
