"""A stop acknowledged for a queued task nobody holds lands in the store at once (issue 22, 11).

Before: ``stop()`` of an enqueued task nobody had claimed (no worker served
it yet, ``not_before`` in the future, a durable task parked in a long sleep)
returned True and wrote a command addressed to nobody; no node applied it,
and the task was claimed later and ran to ``succeeded``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming import Controller, TaskNotFound, TaskStatus
from chongming.state.triggers import Trigger
from tests.conftest import FAST
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]


async def extract(ctx: Any, day: str) -> str:
    return day


async def napper(ctx: Any) -> str:
    await ctx.sleep("nap", 3600)  # parks: the task goes back to the queue, unowned
    return "woke"


async def test_a_stop_of_an_unclaimed_task_is_written_and_nothing_runs_it(
    where: object, stores: StoreMaker
) -> None:
    async with Controller(store=stores.make(where), owner="client") as client:
        later = await client.enqueue("extract", "d1", task_id="later")
        soon = await client.enqueue(
            "extract", "d2", task_id="future", not_before=datetime.now(UTC) + timedelta(hours=1)
        )
        assert await client.stop("later", reason="not needed")
        assert await client.stop("future")
        for queued in (later, soon):
            stored = await queued.get()
            assert stored.status is TaskStatus.STOPPED
            assert stored.owner is None
            last = (await client.history(queued.task_id))[-1]
            assert (last.from_status, last.trigger) == (TaskStatus.QUEUED, Trigger.USER_STOP)
        assert (await client.history("later"))[-1].reason == "not needed"
        store = client.store
        assert store is not None
        assert await store.command_records() == []  # nothing addressed to nobody
        assert not await client.stop("later")  # ended already
        # A worker that serves the name takes what is left, and never the stopped one.
        witness = await client.enqueue("extract", "d3", task_id="witness")
        worker = Controller(
            store=stores.make(where), owner="w-1", work=True, poll_interval=0.05, windows=FAST
        )
        worker.register("extract", extract)
        async with worker:
            assert (await witness.wait(timeout=10)).status is TaskStatus.SUCCEEDED
            for never in ("later", "future"):
                with pytest.raises(TaskNotFound):
                    worker.run_for(never)
        assert (await later.get()).status is TaskStatus.STOPPED


async def test_a_stop_of_a_parked_durable_task_lands(where: object, stores: StoreMaker) -> None:
    async with Controller(store=stores.make(where), owner="client") as client:
        queued = await client.enqueue("napper", task_id="nap-1")
        worker = Controller(
            store=stores.make(where), owner="w-1", work=True, poll_interval=0.05, windows=FAST
        )
        worker.register("napper", napper, durable=True)
        async with worker:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while (stored := await queued.get()).owner is not None or stored.attempt == 0:
                assert loop.time() < deadline, "the task never parked"
                await asyncio.sleep(0.02)
            assert stored.status is TaskStatus.QUEUED
            assert stored.not_before is not None
            assert await client.stop("nap-1")
            assert (await queued.get()).status is TaskStatus.STOPPED


async def test_a_stop_of_a_queued_task_whose_owner_is_dead_lands(
    where: object, stores: StoreMaker
) -> None:
    async with Controller(store=stores.make(where), owner="client") as client:
        queued = await client.enqueue("extract", "d1", task_id="orphan")
        store = client.store
        assert store is not None
        # A worker that claimed it and died: no node row under its name is live.
        [claimed] = await store.claim("ghost", serves={"extract": [None]}, buckets=None, limit=1)
        assert claimed.owner == "ghost"
        assert await client.stop("orphan")
        assert (await queued.get()).status is TaskStatus.STOPPED
        assert await store.command_records() == []
