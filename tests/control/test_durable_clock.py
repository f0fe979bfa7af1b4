"""Durable sleeps and fact deadlines are set and judged by the store's clock, not the node's.

The store here runs an hour ahead of this process (another machine's clock,
say). A parked sleep's earliest start is compared with the store's clock by
the claim, so the wake-up time must be the store's too: recorded by the
node's clock, the task would be claimable at once, replay, find its wake-up
time still ahead and park again, over and over.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from chongming import Controller, TaskContext, TaskStatus
from chongming.errors import FactTimeout
from chongming.state.triggers import Trigger
from chongming.stores.memory import InMemoryTaskStore
from tests.conftest import FAST

AHEAD = timedelta(hours=1)


def _ahead() -> datetime:
    return datetime.now(UTC) + AHEAD


async def nap(ctx: TaskContext) -> str:
    await ctx.sleep("nap", 1.0)
    return "rested"


async def waits(ctx: TaskContext) -> str:
    try:
        await ctx.wait_for_fact("never", timeout=1.0, poll_interval=0.05)
    except FactTimeout:
        return "timed out"
    return "fact"


async def test_a_parked_sleep_wakes_once_by_the_store_clock_when_it_runs_ahead() -> None:
    store = InMemoryTaskStore(clock=_ahead)
    async with Controller(store=store, owner="client") as client:
        queued = await client.enqueue("nap", task_id="n-1")
        worker = Controller(
            store=store,
            owner="w-1",
            work=True,
            poll_interval=0.02,
            windows=FAST,
            park_threshold=0.2,  # the one-second sleep parks
        )
        worker.register("nap", nap, durable=True)
        worker.register("waits", waits, durable=True)
        async with worker:
            final = await queued.wait(timeout=20)
            waited = await (await client.enqueue("waits", task_id="f-1")).wait(timeout=20)
        history = await client.history("n-1")
        (step,) = await store.steps("n-1")
        (deadline, decided) = await store.steps("f-1")
    assert final.status is TaskStatus.SUCCEEDED
    assert [t.trigger for t in history].count(Trigger.PARKED) == 1
    assert isinstance(step.value, float)
    assert step.value > time.time() + AHEAD.total_seconds() - 60  # the store's clock
    assert waited.result == "timed out"
    assert isinstance(deadline.value, float)
    assert deadline.value > time.time() + AHEAD.total_seconds() - 60
    assert decided.value == {"timeout": True}
