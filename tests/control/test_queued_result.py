"""``QueuedTask.result``: a task enqueued by name, awaited from any node, on both stores.

The client enqueues; a worker controller (its own connection, or its own
SQLite handle) runs the task. A success answers its value, any other end
raises ``TaskFailed`` with the status and the failure; a timeout leaves the
task alone. On PostgreSQL the wait is woken by the end's NOTIFY: a client
that polls every 30 s still has its answer within seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from chongming import Controller, TaskFailed, TaskStatus
from tests.conftest import FAST
from tests.control.both_stores import StoreMaker, stores, where
from tests.stores.pg_support import drop_schema, fresh_name, require_postgres

__all__ = ["stores", "where"]  # fixtures


async def double(ctx: Any, n: int) -> int:
    return n * 2


async def refuse(ctx: Any) -> None:
    raise PermissionError("card declined")


async def hold(ctx: Any, gate: str) -> None:
    await asyncio.sleep(3600)


def _worker(stores: StoreMaker, where: object) -> Controller:
    worker = Controller(
        store=stores.make(where), owner="w-1", work=True, poll_interval=0.05, windows=FAST
    )
    worker.register("double", double)
    worker.register("refuse", refuse)
    worker.register("hold", hold)
    return worker


async def test_a_success_answers_its_value_and_a_failure_raises_task_failed(
    stores: StoreMaker, where: object
) -> None:
    async with Controller(store=stores.make(where), owner="client", poll_interval=0.05) as client:
        doubled = await client.enqueue("double", 21)
        refused = await client.enqueue("refuse")
        async with _worker(stores, where):
            assert await doubled.result(timeout=30) == 42
            with pytest.raises(TaskFailed) as raised:
                await refused.result(timeout=30)
    error = raised.value
    assert (error.task_id, error.status) == (refused.task_id, "failed")
    assert (error.error_type, error.message) == ("PermissionError", "card declined")
    assert "card declined" in str(error)


async def test_a_stopped_task_raises_with_its_status(stores: StoreMaker, where: object) -> None:
    async with Controller(store=stores.make(where), owner="client", poll_interval=0.05) as client:
        held = await client.enqueue("hold", "g")
        async with _worker(stores, where):
            while (await held.get()).status is not TaskStatus.RUNNING:
                await asyncio.sleep(0.02)
            await client.stop(held.task_id, reason="enough")
            with pytest.raises(TaskFailed) as raised:
                await held.result(timeout=30)
    assert raised.value.status == "stopped"


async def test_a_timeout_raises_and_leaves_the_task_alone(
    stores: StoreMaker, where: object
) -> None:
    async with Controller(store=stores.make(where), owner="client", poll_interval=0.05) as client:
        queued = await client.enqueue("double", 1)  # no worker: it stays queued
        with pytest.raises(TimeoutError):
            await queued.result(timeout=0.2)
        with pytest.raises(TimeoutError):
            await queued.result(timeout=-1)  # an expired deadline is a timeout, not a hang
        after = await queued.get()
    assert after.status is TaskStatus.QUEUED
    assert after.status_version == queued.snapshot.status_version


@pytest.fixture
def on_postgres() -> Iterator[object]:
    """Only PostgreSQL notifies (SQLite waiters poll: the tests above)."""
    dsn = require_postgres()
    schema = fresh_name("end")
    try:
        yield (dsn, schema)
    finally:
        asyncio.run(drop_schema(schema))


async def test_on_postgres_the_end_wakes_a_client_that_polls_rarely(
    stores: StoreMaker, on_postgres: object
) -> None:
    where = on_postgres
    async with Controller(store=stores.make(where), owner="client", poll_interval=30) as client:
        ends = [await client.enqueue("double", n) for n in range(5)]
        async with _worker(stores, where):
            # Polling alone would answer after 30 s; the NOTIFY of each end's commit wakes it.
            values = await asyncio.wait_for(
                asyncio.gather(*(queued.result() for queued in ends)), timeout=15
            )
    assert values == [0, 2, 4, 6, 8]
