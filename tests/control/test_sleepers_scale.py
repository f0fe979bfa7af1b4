"""Many sleeping durable tasks hold no slot and no memory, and sleep through a worker restart.

``CHONGMING_SLEEPERS`` tasks (300 in ``make test``; 10,000 in ``make
proofs``) each sleep until one shared wake-up time, long enough to park
(set once they are all enqueued, before a worker starts, so the time the
enqueues take under load does not eat the parking's margin). A
worker with 50 slots parks them all: at one moment every task is ``queued``
with its wake-up time, no node owns any, and the worker holds none in
memory. That worker is closed, a new one (another node) starts, and at the
wake-up time every task resumes there and succeeds, each having slept once
(one recorded wake-up time, two starts of one attempt). On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from chongming import Controller, TaskContext, TaskStatus
from chongming.state.query import TaskQuery
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore
from tests.control.both_stores import StoreMaker, stores, where
from tests.tiers import proof_size

__all__ = ["stores", "where"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.proof]

SLEEPERS = proof_size("CHONGMING_SLEEPERS", reduced=300, full=10_000)
SLOTS = 50


#: The shared wake-up time (epoch seconds), read by a task's first run; a replay
#: sleeps until the time its first run recorded.
WAKE_AT: list[float] = []
#: Seconds of margin per sleeper for the worker to park them all before the wake-up time.
PARK_MARGIN = 0.015


async def nap(ctx: TaskContext) -> int:
    await ctx.sleep("nap", max(0.0, WAKE_AT[0] - time.time()))
    return ctx.attempt


@pytest.fixture(autouse=True)
def _maker(stores: StoreMaker) -> None:
    MAKER[:] = [stores]


MAKER: list[StoreMaker] = []


def _store(where: object) -> TaskStore | Path:
    return MAKER[0].make(where)


def _worker(where: object, owner: str) -> Controller:
    worker = Controller(
        store=_store(where), owner=owner, work=True, poll_interval=0.05, max_parallel=SLOTS
    )
    worker.register("nap", nap, durable=True)
    return worker


async def _counts(store: TaskStore) -> dict[TaskStatus, int]:
    counts: dict[TaskStatus, int] = {}
    for count in await store.task_counts():
        counts[count.status] = counts.get(count.status, 0) + count.count
    return counts


async def test_sleeping_tasks_hold_no_slot_and_survive_a_restart_of_every_worker(
    where: object,
) -> None:
    async with Controller(store=_store(where), owner="client") as client:
        store = client.store
        assert store is not None
        ids = [f"nap-{n}" for n in range(SLEEPERS)]
        for start in range(0, SLEEPERS, 500):
            await asyncio.gather(
                *(client.enqueue("nap", task_id=i) for i in ids[start : start + 500])
            )
        # Room to park them all before anyone wakes (a few ms each, with slack for load).
        until = time.time() + 10 + SLEEPERS * PARK_MARGIN
        WAKE_AT[:] = [until]
        async with _worker(where, "w-1") as first:
            while True:
                assert time.time() < until, "the wake-up time came before they all parked"
                queued = await store.query(TaskQuery(statuses=frozenset({TaskStatus.QUEUED})))
                parked = sum(1 for q in queued if q.not_before is not None and q.owner is None)
                stats = await first.stats()
                if parked == SLEEPERS and stats.held == 0:
                    break
                await asyncio.sleep(0.5)
            # Every task sleeps in the store: none holds a slot or sits in the worker's memory.
            assert stats.holding_slot == 0
            sample = await store.get(ids[-1])
            assert sample is not None
            assert sample.owner is None
            assert sample.not_before is not None
            assert abs(sample.not_before.timestamp() - until) < 1.0
        assert time.time() < until  # the first worker is gone before anyone wakes
        async with _worker(where, "w-2"):
            deadline = until + 60 + SLEEPERS * 0.01
            while (await _counts(store)).get(TaskStatus.SUCCEEDED, 0) < SLEEPERS:
                assert time.time() < deadline, await _counts(store)
                await asyncio.sleep(0.2)
        woke = [await store.get(i) for i in ids[:: max(1, SLEEPERS // 50)]]
        histories = await store.histories([s.task_id for s in woke if s is not None])
        steps = await store.steps(ids[0])
    for snapshot in woke:
        assert snapshot is not None
        # came back on w-2, still its first attempt (a park or resume is no retry)
        assert (snapshot.result, snapshot.owner) == (1, "w-2")
        assert snapshot.finished_at is not None
        assert snapshot.finished_at.timestamp() >= until - 0.5  # not before its wake-up time
    for history in histories.values():
        assert [t.trigger for t in history].count(Trigger.PARKED) == 1
    assert [step.name for step in steps] == ["sleep:nap"]
