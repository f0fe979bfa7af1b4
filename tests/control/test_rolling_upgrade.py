"""The rolling upgrade of docs/deploy.md, step by step, under a steady stream of enqueues.

Version 1 of ``sync`` is live on one worker. (1) A worker serving both
versions starts and the old one closes (its unfinished work goes back and
the new worker resumes it). (2) Enqueuers name no version, so each takes the
highest a live worker serves: 2 from now on. (3) Once no ``sync@1`` task is
queued, a worker serving only 2 replaces the two-version one. Every task
runs the code of the version it was pinned to at its enqueue, none fails,
and none runs twice.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from chongming import Controller, QueuedTask, TaskContext, TaskStatus
from chongming.state.query import TaskQuery

RAN: Counter[str] = Counter()


async def sync_v1(ctx: TaskContext, tenant: str) -> str:
    RAN[ctx.task_id] += 1
    await asyncio.sleep(0.05)
    return f"v1:{tenant}"


async def sync_v2(ctx: TaskContext, tenant: str) -> str:
    RAN[ctx.task_id] += 1
    await asyncio.sleep(0.05)
    return f"v2:{tenant}"


def _worker(db: Path, owner: str, *versions: int) -> Controller:
    worker = Controller(store=db, owner=owner, work=True, poll_interval=0.05, max_parallel=4)
    for version in versions:
        worker.register("sync", {1: sync_v1, 2: sync_v2}[version], version=version)
    return worker


async def test_a_rolling_upgrade_runs_each_task_on_the_version_it_was_pinned_to(
    tmp_path: Path,
) -> None:
    RAN.clear()
    db = tmp_path / "q.db"
    queued: list[QueuedTask] = []
    async with Controller(store=db, owner="client", poll_interval=0.05) as client:

        async def enqueue(count: int) -> None:
            for _ in range(count):
                n = len(queued)
                queued.append(await client.enqueue("sync", f"t{n}", task_id=f"s-{n:03d}"))

        old = _worker(db, "w-v1", 1)
        async with old:
            await enqueue(12)
            both = _worker(db, "w-v1v2", 1, 2)
            await both.start()
            await old.close(grace=0.1)  # step 1: what it still runs is handed back
        try:
            await asyncio.sleep(0.2)  # the client sees the old worker gone ...
            await enqueue(12)  # ... step 2: these take version 2
            waiting = TaskQuery(statuses=frozenset({TaskStatus.QUEUED}))
            async with asyncio.timeout(20):  # step 3: wait until no @1 task is queued
                while any(t.version == 1 for t in await client.list_tasks(waiting)):
                    await asyncio.sleep(0.05)
            new = _worker(db, "w-v2", 2)
            await new.start()
        finally:
            await both.close(grace=5)
        async with new:
            await enqueue(6)
            finals = [await q.wait(timeout=20) for q in queued]
    pinned = [q.snapshot.version for q in queued]
    assert pinned[:12] == [1] * 12
    assert pinned[12:] == [2] * 18
    assert [f.status for f in finals] == [TaskStatus.SUCCEEDED] * len(finals)
    results: list[Any] = [f.result for f in finals]
    assert results == [f"v{v}:t{n}" for n, v in enumerate(pinned)]
    assert {f.version for f in finals[12:]} == {2}
    assert Counter({q.task_id: 1 for q in queued}) == RAN
    assert {f.owner for f in finals[:12]} <= {"w-v1", "w-v1v2"}
    assert {f.owner for f in finals[24:]} == {"w-v2"}
