"""A long wait for a fact parks the task off its slot; sending the fact wakes it.

The workers' ``park_threshold`` is lowered for these tests: a wait with that
long or more to go parks at its first look that finds no fact, as a wait of
5 seconds or more does by default. On SQLite and on PostgreSQL (where the wake also notifies the
workers' queue channel).
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, TaskStatus
from chongming.errors import ConfigurationError, FactTimeout
from chongming.plane import durable_waits, parking
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore
from chongming.stores.durable import Fact
from tests.conftest import FAST
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]  # fixtures

PARK_THRESHOLD = 0.3


@pytest.fixture(autouse=True)
def _maker(stores: StoreMaker) -> None:
    MAKER[:] = [stores]


MAKER: list[StoreMaker] = []


def _store(where: object) -> TaskStore | Path:
    return MAKER[0].make(where)


async def waits(ctx: Any, timeout: float | None = None) -> Any:
    try:
        return await ctx.wait_for_fact("downloaded", timeout=timeout, poll_interval=0.02)
    except FactTimeout:
        return "timed out"


def _worker(where: object, **options: Any) -> Controller:
    options.setdefault("park_threshold", PARK_THRESHOLD)
    worker = Controller(
        store=_store(where), owner="w-1", work=True, poll_interval=0.05, windows=FAST, **options
    )
    worker.register("waits", waits, durable=True)
    return worker


async def _all_parked(client: Controller, task_ids: list[str]) -> None:
    while True:
        found = [await client.get(task_id) for task_id in task_ids]
        if all(s.status is TaskStatus.QUEUED and s.not_before for s in found):
            return
        await asyncio.sleep(0.02)


async def test_waiting_tasks_park_off_their_slots_and_each_fact_wakes_its_task(
    where: object,
) -> None:
    ids = [f"w-{n}" for n in range(6)]
    async with Controller(store=_store(where), owner="client") as client:
        queued = [await client.enqueue("waits", task_id=task_id) for task_id in ids]
        async with _worker(where, max_parallel=2) as worker:
            # Six waiters, two slots: all six get to wait, because a parked one holds none.
            await asyncio.wait_for(_all_parked(client, ids), 30)
            stats = await worker.stats()
            assert stats.holding_slot == 0
            assert stats.held == 0  # let go: a parked waiter costs a row, no memory here
            parked = await client.get("w-0")
            assert parked.not_before is not None
            # Parked for an hour (no timeout): only the fact can bring it back in time.
            assert parked.not_before.timestamp() > time.time() + durable_waits.FACT_RECHECK / 2
            for n, task_id in enumerate(ids):
                assert await client.signal(task_id, "downloaded", {"bytes": n}) is True
            finals = [await q.wait(timeout=30) for q in queued]
        history = await client.history("w-0")
    assert [f.status for f in finals] == [TaskStatus.SUCCEEDED] * 6
    assert [f.result for f in finals] == [{"bytes": n} for n in range(6)]
    parks = [t for t in history if t.trigger == Trigger.SLEEPING]
    assert len(parks) == 1
    assert parks[0].reason is not None
    assert "fact 'downloaded'" in parks[0].reason
    # the start after the park continues the first attempt (a park is no retry)
    assert [t.attempt for t in history if t.trigger == Trigger.DISPATCH] == [1, 1]


async def test_a_parked_wait_comes_back_at_its_deadline_and_times_out_once(
    where: object,
) -> None:
    async with Controller(store=_store(where), owner="client") as client:
        queued = await client.enqueue("waits", 1.5, task_id="t-1")
        async with _worker(where):
            await asyncio.wait_for(_all_parked(client, ["t-1"]), 30)
            final = await queued.wait(timeout=30)
            # The timeout was decided and recorded: a fact sent now changes nothing.
            await client.signal("t-1", "downloaded", "late")
        history = await client.history("t-1")
    assert final.status is TaskStatus.SUCCEEDED
    assert final.result == "timed out"
    assert any(t.trigger == Trigger.PARKED for t in history)


async def test_a_fact_sent_while_the_task_is_being_parked_still_wakes_it(
    where: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fact lands after the waiter's last look but before the park is durable.

    The store's wake at ``put_fact`` then finds the task still running, so
    nothing is woken by it; the park's own write must find the fact, or the
    task would sleep for an hour (no later call from the parking node, which
    could die right after the park, is relied on).
    """
    async with Controller(store=_store(where), owner="client") as client:
        queued = await client.enqueue("waits", task_id="r-1")
        worker = _worker(where, park_threshold=0.0)  # the first look without it parks
        store = worker.store
        assert store is not None
        look = store.get_fact

        async def look_then_send(task_id: str, name: str) -> Fact | None:
            found = await look(task_id, name)
            if found is None:  # the waiter parks right after this look, which saw no fact
                await store.put_fact(Fact(task_id=task_id, name=name, payload="raced"))
                held = await store.get(task_id)  # still held by its attempt: nothing to wake
                assert held is not None
                assert held.status in (TaskStatus.STARTING, TaskStatus.RUNNING)
            return found

        store.get_fact = look_then_send  # type: ignore[method-assign]
        async with worker:
            final = await queued.wait(timeout=30)
        history = await client.history("r-1")
    assert final.status is TaskStatus.SUCCEEDED
    assert final.result == "raced"
    assert any(t.trigger == Trigger.PARKED for t in history)


CLIENT: list[Controller] = []


async def parent(ctx: Any) -> Any:
    return await ctx.wait_for_fact("child-done", timeout=600, poll_interval=0.05)


async def child(ctx: Any, parent_id: str) -> None:
    await CLIENT[0].signal(parent_id, "child-done", {"from": ctx.task_id})


async def test_parents_waiting_for_their_children_give_their_slots_back_at_once(
    where: object,
) -> None:
    """The starvation trap: parents claimed first (older) and holding every slot while they
    wait would keep their children from running. With the default threshold a wait with
    5 s or more to go parks at its first look that finds no fact."""
    parents = [f"parent-{n}" for n in range(6)]
    async with Controller(store=_store(where), owner="client") as client:
        CLIENT[:] = [client]
        queued = [await client.enqueue("parent", task_id=task_id) for task_id in parents]
        for task_id in parents:
            await client.enqueue("child", task_id, task_id=f"child-of-{task_id}")
        worker = Controller(
            store=_store(where), owner="w-1", work=True, poll_interval=0.05, windows=FAST,
            max_parallel=2,
        )  # fmt: skip
        worker.register("parent", parent, durable=True)
        worker.register("child", child)
        async with worker:
            finals = [await q.wait(timeout=60) for q in queued]
        histories = [await client.history(task_id) for task_id in parents]
    assert [f.result for f in finals] == [{"from": f"child-of-{p}"} for p in parents]
    for history in histories:
        running = next(t for t in history if t.to_status is TaskStatus.RUNNING)
        parked = next(t for t in history if t.trigger == Trigger.SLEEPING)
        held = (parked.at - running.at).total_seconds()
        assert held < parking.PARK_AFTER / 2, held  # not the threshold's 5 s in the slot


async def test_the_park_threshold_is_checked_and_infinity_never_parks(tmp_path: Path) -> None:
    for bad in (-1, math.nan, "5", True, None):
        with pytest.raises(ConfigurationError, match=r"park_threshold must be a number"):
            Controller(store=tmp_path / "bad.db", park_threshold=bad)  # type: ignore[arg-type]
    async with Controller(store=tmp_path / "q.db", owner="client") as client:
        queued = await client.enqueue("waits", task_id="n-1")  # no deadline: would park at once
        worker = _worker(tmp_path / "q.db", park_threshold=math.inf)
        store = worker.store
        assert store is not None
        look, looks = store.get_fact, asyncio.Semaphore(0)

        async def counted(task_id: str, name: str) -> Fact | None:
            looks.release()
            return await look(task_id, name)

        store.get_fact = counted  # type: ignore[method-assign]
        async with worker:
            for _ in range(3):  # it looked again and again: a park would have ended the attempt
                await asyncio.wait_for(looks.acquire(), 30)
            await client.signal("n-1", "downloaded", "in its slot")
            final = await queued.wait(timeout=30)
        history = await client.history("n-1")
    assert final.result == "in its slot"
    assert not any(t.trigger == Trigger.SLEEPING for t in history)
