"""Starvation on one small worker: children of parked parents keep moving; aging beats a flood.

The order-service pattern: N parents are queued at once; each does a little
work, enqueues its child and waits for it (``ctx.wait_for_fact``, parked off
its slot). Claims by priority then age would run every parent's first part
before any child (the parents are older), so the last child waits for the
whole backlog. The rule the docs give the operator: a child goes one priority
above its parent. Then each child is claimed at the next free slot: the worst
child's wait stays within a bound with slack, well below what the same
queue gives children at their parents' priority (measured in the same test,
so the bound could fail).

Aging: one low-priority task against a continuous flood of higher-priority
work. Strict priority runs it after the whole flood; with ``age_step`` it
starts while the flood is still being served (ordering from the stored
histories, never an exact duration).

``@pytest.mark.proof``: 60 parents in ``make test``, 500 with ``CHONGMING_PROOFS=full``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, TaskStatus
from chongming.controller.pools import WorkerPool
from tests.conftest import FAST
from tests.tiers import proof_size

pytestmark = [pytest.mark.slow, pytest.mark.proof]

PARENTS = proof_size("CHONGMING_STARVATION_PARENTS", reduced=60, full=500)
WORK = 0.1  # a parent's first part (seconds)
SLOTS = 4
#: The worst child's wait (enqueue -> running) when children go first: about one
#: parent's work, with slack for a loaded machine.
BOUND = 1.5

CLIENT: list[Controller] = []
CHILD_PRIORITY: list[int] = [1]


async def parent(ctx: Any) -> Any:
    await asyncio.sleep(WORK)

    async def enqueue_child() -> str:
        queued = await CLIENT[0].enqueue(
            "child",
            ctx.task_id,
            priority=CHILD_PRIORITY[0],
            idempotency_key=f"child-of-{ctx.task_id}",
        )
        return queued.task_id

    await ctx.step("enqueue child", enqueue_child)
    return await ctx.wait_for_fact("child-done")  # no deadline: parks off its slot


async def child(ctx: Any, parent_id: str) -> None:
    await CLIENT[0].signal(parent_id, "child-done", ctx.task_id)


async def _transition_at(client: Controller, task_id: str, status: TaskStatus) -> datetime:
    history = await client.history(task_id)
    return next(t.at for t in history if t.to_status is status)


async def _worst_child_wait(db: Path, child_priority: int) -> float:
    CHILD_PRIORITY[0] = child_priority
    async with Controller(store=db, owner="client") as client:
        CLIENT[:] = [client]
        parents = [await client.enqueue("parent") for _ in range(PARENTS)]
        worker = Controller(
            store=db, owner="small", work=True, max_parallel=SLOTS, poll_interval=0.05,
            windows=FAST,
        )  # fmt: skip
        worker.register("parent", parent, durable=True)
        worker.register("child", child)
        async with worker:
            finals = [await task.wait(timeout=PARENTS * WORK + 120) for task in parents]
        assert {final.status for final in finals} == {TaskStatus.SUCCEEDED}
        waits = []
        for final in finals:
            child_id = str(final.result)
            queued = await _transition_at(client, child_id, TaskStatus.QUEUED)
            running = await _transition_at(client, child_id, TaskStatus.RUNNING)
            waits.append((running - queued).total_seconds())
    return max(waits)


async def test_children_of_parked_parents_keep_moving_on_a_small_worker(tmp_path: Path) -> None:
    first = await _worst_child_wait(tmp_path / "first.db", child_priority=1)
    same = await _worst_child_wait(tmp_path / "same.db", child_priority=0)
    print(f"starvation proof: {PARENTS} parents, worst child wait {first:.2f} s (children first)")
    print(f"  vs {same:.2f} s with children at their parents' priority")
    assert first <= BOUND, f"a child waited {first:.2f} s"
    assert same > first  # the same queue without the rule: the children wait behind parents


async def quick(ctx: Any) -> None:
    await asyncio.sleep(0.02)


async def _flood_then_low(db: Path, pool: WorkerPool) -> tuple[datetime, list[datetime]]:
    """Start times of the low task and of every flood task."""
    async with Controller(store=db, owner="client") as client:
        flood = [await client.enqueue("quick", priority=5) for _ in range(20)]  # already queued
        low = await client.enqueue("quick", priority=0)
        worker = Controller(
            store=db, owner="w", work=True, max_parallel=2, poll_interval=0.05, windows=FAST,
            pool=pool,
        )  # fmt: skip
        worker.register("quick", quick)
        async with worker:
            loop = asyncio.get_running_loop()
            until = loop.time() + 2.0
            while loop.time() < until:  # ~150 a second against ~100 served: a growing queue
                flood += [await client.enqueue("quick", priority=5) for _ in range(3)]
                await asyncio.sleep(0.02)
            assert (await low.wait(timeout=60)).status is TaskStatus.SUCCEEDED
            for task in flood:
                await task.wait(timeout=60)
        low_start = await _transition_at(client, low.task_id, TaskStatus.RUNNING)
        starts = [await _transition_at(client, t.task_id, TaskStatus.RUNNING) for t in flood]
    return low_start, starts


async def test_aging_lets_a_low_task_through_a_flood_of_higher_work(tmp_path: Path) -> None:
    low, flood = await _flood_then_low(tmp_path / "aged.db", WorkerPool(age_step=0.1))
    after = sum(start > low for start in flood)
    print(f"aging proof: {after} of {len(flood)} flood tasks started after the low one")
    assert after >= len(flood) // 4  # it ran while the flood was still being served
    low, flood = await _flood_then_low(tmp_path / "strict.db", WorkerPool())
    assert sum(start > low for start in flood) == 0  # strict priority: after the whole flood
