"""``stats()`` with a store counts what the store holds: every node's tasks, not only local runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chongming import Controller, TaskStatus
from tests.conftest import FAST

GATE = asyncio.Event()


async def held(ctx: object, n: int) -> int:
    await GATE.wait()
    return n


async def test_a_query_client_counts_the_tasks_another_node_runs(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    GATE.clear()
    worker = Controller(store=db, owner="w-1", work=True, poll_interval=0.02, windows=FAST)
    worker.register("held", held)
    async with worker, Controller(store=db, owner="client") as client:
        queued = [await client.enqueue("held", n) for n in range(3)]
        await client.enqueue("nobody-serves-this")
        for task in queued:
            while (await client.get(task.task_id)).status is not TaskStatus.RUNNING:
                await asyncio.sleep(0.01)
        seen = await client.stats()
        local = await worker.stats()
        GATE.set()
        for task in queued:
            await task.wait(timeout=20)
        after = await client.stats()
    assert seen.by_status == {"queued": 1, "running": 3}
    assert (seen.total, seen.active, seen.held) == (4, 4, 0)
    assert seen.by_owner == {"": 1, "w-1": 3}
    # The worker tells the same counts, and holds the three itself.
    assert (local.by_status, local.held, local.holding_slot) == (seen.by_status, 3, 3)
    assert after.by_status == {"queued": 1, "succeeded": 3}
    assert (after.total, after.active) == (4, 1)


async def test_without_a_store_stats_counts_this_controllers_runs() -> None:
    GATE.set()
    async with Controller() as controller:
        controller.register("held", held)
        runs = [await controller.submit("held", n) for n in range(2)]
        for run in runs:
            await run.wait(5)
        stats = await controller.stats()
    assert (stats.total, stats.active, stats.held) == (2, 0, 2)
    assert stats.by_status == {"succeeded": 2}
    assert stats.by_owner == {}
