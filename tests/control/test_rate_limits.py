"""``Controller(work=True, rate_limits=...)``: starts of tagged tasks per period, fleet-wide."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming import ConfigurationError, Controller, ExponentialBackoff, RetryPolicy, TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.rates import RateLimit
from chongming.stores.sqlite import SqliteTaskStore
from tests.conftest import FAST


def most_in_a_window(starts: list[datetime], window: float) -> int:
    """The most starts inside any half-open window of ``window`` seconds."""
    times = sorted(start.timestamp() for start in starts)
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


async def _noop(ctx: Any) -> None:
    await ctx.checkpoint()


def _worker(db: Path, owner: str, **options: Any) -> Controller:
    node = Controller(
        store=db,
        owner=owner,
        work=True,
        rate_limits={"api": "10/s"},
        poll_interval=0.05,
        windows=FAST,
        max_parallel=4,
        **options,
    )
    node.register("call_api", _noop, tags=("api",))
    node.register("plain", _noop)
    return node


async def _running_at(client: Controller, task_id: str) -> datetime:
    history = await client.history(task_id)
    return next(t.at for t in history if t.to_status is TaskStatus.RUNNING)


async def test_two_workers_together_start_no_more_than_the_rate(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    workers = [_worker(db, f"w-{n}") for n in range(2)]
    async with Controller(store=db, owner="client") as client:
        client.register("call_api", _noop, tags=("api",))
        client.register("plain", _noop)
        limited = [await client.enqueue("call_api") for _ in range(20)]
        for worker in workers:
            await worker.start()
        try:
            finals = [await task.wait(timeout=30) for task in limited]
            starts = [await _running_at(client, task.task_id) for task in limited]
        finally:
            for worker in workers:
                await worker.close()
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * 20
    # 10/s, burst 1: one start per 0.1 s; +1 for the time between a grant and its start.
    assert most_in_a_window(starts, 1.0) <= 11
    span = max(starts) - min(starts)
    assert span.total_seconds() >= 1.7  # 20 starts at 10/s need 1.9 s: they were spaced


async def test_untagged_work_passes_tasks_waiting_for_a_grant(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with SqliteTaskStore(db) as store:
        await store.declare_rate_limit("api", RateLimit(rate=1, per=timedelta(minutes=1)))
    async with Controller(store=db, owner="client") as client:
        client.register("call_api", _noop, tags=("api",))
        client.register("plain", _noop)
        limited = [await client.enqueue("call_api") for _ in range(5)]
        plain = [await client.enqueue("plain") for _ in range(10)]
        worker = _worker(db, "w-0")
        worker_store = worker.store
        assert worker_store is not None
        asks, take = [], worker_store.take_rate_grants

        async def counted(name: str, **options: Any) -> Any:
            asks.append(name)
            return await take(name, **options)

        worker_store.take_rate_grants = counted  # type: ignore[method-assign]
        async with worker:
            for task in plain:  # not stuck behind the four that wait a minute each
                assert (await task.wait(timeout=10)).status is TaskStatus.SUCCEEDED
            assert (await limited[0].wait(timeout=10)).status is TaskStatus.SUCCEEDED
            asked = len(asks)
            await asyncio.sleep(0.5)  # ten poll intervals: the rest stays queued, unowned
            waiting = [await client.get(task.task_id) for task in limited[1:]]
            assert len(asks) == asked  # the next grant is a minute away: nobody asks meanwhile
    assert {(s.status, s.owner) for s in waiting if s is not None} == {(TaskStatus.QUEUED, None)}
    assert asked <= 3  # the first grant, and the refusal that said when the next is due


@pytest.mark.parametrize("store_kind", ["sqlite", "memory"])
async def test_a_granted_claim_starts_in_one_step_with_the_trajectory_of_a_dispatch(
    tmp_path: Path, store_kind: str
) -> None:
    """What the grants let start is started by ``start_claimed``: no histories read, no
    start written per task, and the same ``queued -> starting -> running`` trajectory."""
    shared: TaskStore = (
        SqliteTaskStore(tmp_path / "q.db") if store_kind == "sqlite" else InMemoryTaskStore()
    )
    calls: list[str] = []
    histories, start_claimed = shared.histories, shared.start_claimed

    async def counted_histories(task_ids: Any) -> Any:
        calls.append("histories")
        return await histories(task_ids)

    async def counted_starts(owner: str, claimed: Any, **options: Any) -> Any:
        calls.append(f"start_claimed:{len(claimed)}")
        return await start_claimed(owner, claimed, **options)

    shared.histories = counted_histories  # type: ignore[method-assign]
    shared.start_claimed = counted_starts  # type: ignore[method-assign]
    async with shared:
        await shared.declare_rate_limit("api", RateLimit(rate=1000, per=timedelta(seconds=1)))
        async with Controller(store=shared, owner="client") as client:
            client.register("call_api", _noop, tags=("api",))
            limited = [await client.enqueue("call_api") for _ in range(6)]
            worker = Controller(
                store=shared,
                owner="w-0",
                work=True,
                rate_limits={"api": "1000/s"},
                poll_interval=0.05,
                windows=FAST,
            )
            worker.register("call_api", _noop, tags=("api",))
            async with worker:
                finals = [await task.wait(timeout=10) for task in limited]
            trajectories = [
                [(t.to_status, t.trigger) for t in await client.history(task.task_id)]
                for task in limited
            ]
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * 6
    assert "histories" not in calls
    assert sum(int(call.split(":")[1]) for call in calls) == 6
    for trajectory in trajectories:
        assert trajectory[:3] == [
            (TaskStatus.QUEUED, Trigger.ENQUEUED),
            (TaskStatus.STARTING, Trigger.DISPATCH),
            (TaskStatus.RUNNING, Trigger.LAUNCHED),
        ]
        assert trajectory[-1][0] is TaskStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("limits", "problem"),
    [
        (["api"], "must be a mapping"),
        ({"api": "0/s"}, r"rate_limits\['api'\].*rate"),
        ({"api": "-3/s"}, r"rate_limits\['api'\]"),
        ({"api": "1e9/s"}, r"rate_limits\['api'\].*10000 starts/s"),
        ({"api": "ten per second"}, r"rate_limits\['api'\].*cannot read"),
        ({"api": "10/fortnight"}, r"rate_limits\['api'\].*unknown unit 'fortnight'"),
        ({"api": "10/s burst 0"}, r"rate_limits\['api'\].*burst"),
        ({"api": "2.5/s"}, r"rate_limits\['api'\].*whole number"),
        ({"api": 10}, r"rate_limits\['api'\]"),
        ({"": "10/s"}, "rate limit name"),
        ({"a\x00": "10/s"}, "rate limit name"),
    ],
)
def test_bad_rate_limits_are_refused_when_the_controller_is_built(
    tmp_path: Path, limits: Any, problem: str
) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        Controller(store=tmp_path / "q.db", work=True, rate_limits=limits)
    assert not (tmp_path / "q.db").exists()  # nothing written, not even the file


def test_rate_limits_need_a_worker_on_a_store_that_has_them(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="work=True"):
        Controller(rate_limits={"api": "10/s"})
    with pytest.raises(ConfigurationError, match="work=True"):
        Controller(store=tmp_path / "q.db", rate_limits={"api": "10/s"})

    class NoRates(InMemoryTaskStore):
        take_rate_grants = TaskStore.take_rate_grants  # the port's default: none

    with pytest.raises(ConfigurationError, match="NoRates has no cluster-wide rate limits"):
        Controller(store=NoRates(), work=True, rate_limits={"api": "10/s"})


FAILS_ONCE: set[str] = set()


async def _flaky(ctx: Any) -> str:
    if ctx.task_id not in FAILS_ONCE:
        FAILS_ONCE.add(ctx.task_id)
        raise RuntimeError("the vendor said 503")
    return "ok"


async def test_a_retry_asks_for_its_grant_again(tmp_path: Path) -> None:
    """A retry is a start: requeued, the next attempt waits for the limit like the first."""
    db = tmp_path / "q.db"
    retry = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01))
    async with Controller(store=db, owner="client") as client:
        queued = [await client.enqueue("flaky", task_id=f"f-{n}") for n in range(2)]
        worker = _worker(db, "w-0")
        worker.register("flaky", _flaky, tags=("api",), retry=retry)
        store = worker.store
        assert store is not None
        granted, take = [], store.take_rate_grants

        async def counted(name: str, **options: Any) -> Any:
            grant = await take(name, **options)
            granted.append(grant.granted)
            return grant

        store.take_rate_grants = counted  # type: ignore[method-assign]
        async with worker:
            finals = [await task.wait(timeout=30) for task in queued]
        histories = [await client.history(task.task_id) for task in queued]
    assert [(f.status, f.attempt) for f in finals] == [(TaskStatus.SUCCEEDED, 2)] * 2
    assert sum(granted) == 4  # every start took a grant: two tasks, two attempts each
    for history in histories:
        requeued = [t for t in history if t.trigger == Trigger.RETRY_RELEASED]
        assert len(requeued) == 1  # the retry went back to the queue, then was claimed again
