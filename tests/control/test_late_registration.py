"""A worker publishes what it serves on every registration, and at every renewal (issue 22, 12).

Before: a worker that registered its tasks after ``async with
Controller(work=True)`` started (the first example of docs/work-queue.md)
published what it served only when it became a node, i.e. nothing: enqueues
without a version stayed unpinned (some ran on a v1-only worker while v2 was
live) and ``ps`` said "no worker serves" a name that was served.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chongming import Controller, TaskStatus
from chongming.controller.stored_pipelines import PIPELINE_TASK
from chongming.stores.base import TaskStore
from tests.conftest import FAST
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]


#: What every worker serves before anything is registered: the stored pipelines' coordinator.
BUILT_IN = frozenset({PIPELINE_TASK})


async def v2(ctx: Any) -> str:
    return "v2"


async def other(ctx: Any) -> str:
    return "other"


async def _serves(store: TaskStore, owner: str) -> frozenset[str]:
    return next(n.info.serves for n in await store.nodes() if n.info.owner == owner)


async def _until_serves(store: TaskStore, owner: str, expected: frozenset[str]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while await _serves(store, owner) != expected:
        assert loop.time() < deadline, "the node row never said what the worker serves"
        await asyncio.sleep(0.02)


async def test_tasks_registered_after_the_start_are_published_and_pinned(
    where: object, stores: StoreMaker
) -> None:
    async with Controller(store=stores.make(where), owner="client", poll_interval=0.05) as client:
        store = client.store
        assert store is not None
        worker = Controller(
            store=stores.make(where),
            owner="w-late",
            work=True,
            poll_interval=0.05,
            windows=FAST,
            lease_ttl=3600,  # no renewal during the test: the registration itself publishes
        )
        async with worker:
            await client.enqueue("warmup", task_id="warmup")  # the worker is a node by now
            assert await _serves(store, "w-late") == BUILT_IN
            worker.register("job", v2, version=2)
            await _until_serves(store, "w-late", BUILT_IN | {"job@2"})
            # A new client (no cached view of the rows) pins to the live version.
            async with Controller(store=stores.make(where), owner="client-2") as fresh:
                queued = await fresh.enqueue("job", task_id="j-1")
                assert (await queued.get()).version == 2
                final = await queued.wait(timeout=10)
            report = await client.bucket_report()
            assert "job@2" not in report.unserved
            assert "job" not in report.unserved
            assert (final.status, final.result) == (TaskStatus.SUCCEEDED, "v2")


async def test_a_renewal_publishes_what_changed_in_the_registry(
    where: object, stores: StoreMaker
) -> None:
    async with Controller(store=stores.make(where), owner="client") as client:
        store = client.store
        assert store is not None
        worker = Controller(
            store=stores.make(where),
            owner="w-renews",
            work=True,
            poll_interval=0.05,
            windows=FAST,
            lease_ttl=0.6,
        )
        async with worker:
            await client.enqueue("warmup", task_id="warmup")
            worker.registry.register("other", other)  # past the controller: no publish call
            await _until_serves(store, "w-renews", BUILT_IN | {"other"})
