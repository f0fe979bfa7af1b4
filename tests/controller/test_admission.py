"""Over a limit means queued, in priority order; a paused task keeps its slot."""

from __future__ import annotations

import asyncio

import pytest

from chongming import (
    Controller,
    ControlWindows,
    ExponentialBackoff,
    RetryPolicy,
    TaskQuery,
    TaskStatus,
    render_table,
)
from tests.support import wait_for, wait_status

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)


class Gates:
    """One event per task id; tasks wait on theirs and record their start order."""

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}
        self.started: list[str] = []

    def open(self, *task_ids: str) -> None:
        for task_id in task_ids:
            self.events.setdefault(task_id, asyncio.Event()).set()

    async def job(self, ctx) -> str:  # type: ignore[no-untyped-def]
        self.started.append(ctx.task_id)
        event = self.events.setdefault(ctx.task_id, asyncio.Event())
        while not event.is_set():
            await ctx.checkpoint()
            await asyncio.sleep(0.001)
        return str(ctx.task_id)


@pytest.fixture
def gates() -> Gates:
    return Gates()


async def test_seed_queueing_demo_two_running_two_queued(gates: Gates) -> None:
    async with Controller(max_parallel=2, windows=FAST) as controller:
        controller.register("transform", gates.job)
        for index in range(4):
            await controller.submit("transform", task_id=f"t{index}", label=f"转换-{index + 1}")
        await wait_for(lambda: len(gates.started) == 2)
        statuses = [s.status for s in await controller.list_tasks()]
        assert statuses == [S.RUNNING, S.RUNNING, S.QUEUED, S.QUEUED]
        stats = await controller.stats()
        assert (stats.active, stats.queued, stats.holding_slot) == (4, 2, 2)
        table = render_table(await controller.list_tasks())
        assert table.splitlines()[0].split() == [
            "TASK_ID",
            "NAME",
            "STATUS",
            "ATTEMPT",
            "ELAPSED",
            "PROGRESS",
            "FAILURE",
        ]
        assert "t2       转换-3  queued   0/1      -" in table
        assert table.splitlines()[-1] == "    active 4 (queued 2, holding a slot 2)"
        assert await controller.stop("t0", reason="手工干预")
        await wait_for(lambda: len(gates.started) == 3)
        gates.open("t1", "t2", "t3")
        outcomes = await controller.wait_all(5)
        assert [o.status for o in outcomes] == [S.STOPPED, S.SUCCEEDED, S.SUCCEEDED, S.SUCCEEDED]


async def test_priority_then_fifo(gates: Gates) -> None:
    async with Controller(max_parallel=1) as controller:
        controller.register("job", gates.job)
        await controller.submit("job", task_id="blocker")
        await wait_for(lambda: gates.started == ["blocker"])
        await controller.submit("job", task_id="low-1", priority=0)
        await controller.submit("job", task_id="high-1", priority=5)
        await controller.submit("job", task_id="low-2", priority=0)
        await controller.submit("job", task_id="high-2", priority=5)
        gates.open("blocker", "low-1", "high-1", "low-2", "high-2")
        await controller.wait_all(5)
        assert gates.started == ["blocker", "high-1", "high-2", "low-1", "low-2"]


async def test_resource_limit_by_tag(gates: Gates) -> None:
    async with Controller(max_parallel=5, resource_limits={"io": 1}) as controller:
        controller.register("io", gates.job, tags={"io"})
        controller.register("cpu", gates.job)
        await controller.submit("io", task_id="io-1")
        await controller.submit("io", task_id="io-2")
        await controller.submit("cpu", task_id="cpu-1")
        await controller.submit("cpu", task_id="cpu-2", tags={"io"})  # tagged at submit
        await wait_for(lambda: len(gates.started) == 2)
        assert sorted(gates.started) == ["cpu-1", "io-1"]
        assert (await controller.stats()).per_resource == {"io": 1}
        gates.open("io-1")
        await wait_for(lambda: len(gates.started) == 3)
        assert gates.started[2] == "io-2"
        gates.open("io-2", "cpu-1", "cpu-2")
        await controller.wait_all(5)
        assert gates.started[3] == "cpu-2"


async def test_seed_bucket_demo_backlog_in_one_bucket_does_not_block_another(
    gates: Gates,
) -> None:
    async with Controller(max_parallel=10, max_parallel_per_bucket=1) as controller:
        controller.register("sync", gates.job)
        for index in range(4):
            await controller.submit("sync", task_id=f"a{index}", bucket_key="tenant-A")
        for index in range(2):
            await controller.submit("sync", task_id=f"b{index}", bucket_key="tenant-B")
        await wait_for(lambda: len(gates.started) == 2)
        assert sorted(gates.started) == ["a0", "b0"]
        stats = await controller.stats()
        assert stats.per_bucket == {7: 1, 28: 1}
        assert stats.queued == 4
        table = render_table(await controller.list_tasks(TaskQuery(bucket=7)))
        assert "BUCKET" in table.splitlines()[0]
        assert [line.split()[2] for line in table.splitlines()[2:6]] == ["7"] * 4
        gates.open("a0", "b0")
        await wait_for(lambda: len(gates.started) == 4)
        assert sorted(gates.started[2:]) == ["a1", "b1"]
        gates.open("a1", "a2", "a3", "b1")
        await controller.wait_all(5)


async def test_a_paused_task_keeps_its_slot(gates: Gates) -> None:
    first_when_second_started: list[TaskStatus] = []

    async def job(ctx) -> str:  # type: ignore[no-untyped-def]
        if ctx.task_id == "second":
            first_when_second_started.append(first.status)
        return await gates.job(ctx)

    async with Controller(max_parallel=1, windows=FAST) as controller:
        controller.register("job", job)
        first = await controller.submit("job", task_id="first")
        second = await controller.submit("job", task_id="second")
        await wait_status(first, S.RUNNING)
        assert await controller.pause("first")
        stats = await controller.stats()
        assert (stats.holding_slot, stats.queued) == (1, 1)  # paused still holds it
        assert second.status is S.QUEUED
        assert await controller.resume("first")
        gates.open("first", "second")
        await controller.wait_all(5)
    assert gates.started == ["first", "second"]
    # The slot came back when the first ended, never at its pause.
    assert first_when_second_started == [S.SUCCEEDED]
    assert (S.PAUSING, S.PAUSED) in [(t.from_status, t.to_status) for t in first.transitions]


async def test_retry_wait_gives_the_slot_back(gates: Gates) -> None:
    attempts: list[int] = []

    async def flaky(ctx) -> str:  # type: ignore[no-untyped-def]
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("first attempt fails")
        return "ok"

    slow = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.2, max_delay=0.2))
    async with Controller(max_parallel=1) as controller:
        controller.register("flaky", flaky, retry=slow)
        controller.register("job", gates.job)
        run = await controller.submit("flaky")
        await wait_status(run, S.RETRY_WAIT)
        await controller.submit("job", task_id="other")
        await wait_for(lambda: gates.started == ["other"])  # took the freed slot
        gates.open("other")
        assert (await run.wait(5)).ok
    assert attempts == [1, 2]


async def test_stopping_a_queued_task_withdraws_it(gates: Gates) -> None:
    async with Controller(max_parallel=1) as controller:
        controller.register("job", gates.job)
        await controller.submit("job", task_id="running")
        queued = await controller.submit("job", task_id="queued")
        assert await controller.stop("queued")
        assert queued.status is S.STOPPED
        gates.open("running")
        await controller.wait_all(5)
        assert "queued" not in gates.started
        assert (await controller.stats()).queued == 0


async def test_queries_and_stats(gates: Gates) -> None:
    async with Controller(max_parallel=2) as controller:
        controller.register("job", gates.job, tags={"etl"})
        controller.register("other", gates.job)
        for index in range(3):
            await controller.submit("job", task_id=f"j{index}", bucket_key="tenant-A")
        await controller.submit("other", task_id="o0")
        await wait_for(lambda: len(gates.started) == 2)
        running = await controller.list_tasks(TaskQuery(statuses=frozenset({S.RUNNING})))
        assert [s.task_id for s in running] == ["j0", "j1"]
        assert [s.task_id for s in await controller.list_tasks(TaskQuery(tag="etl"))] == [
            "j0",
            "j1",
            "j2",
        ]
        assert [s.task_id for s in await controller.list_tasks(TaskQuery(name="other"))] == ["o0"]
        assert len(await controller.list_tasks(TaskQuery(limit=1))) == 1
        stats = await controller.stats()
        assert stats.by_status == {"running": 2, "queued": 2}
        assert (stats.total, stats.active, stats.max_parallel) == (4, 4, 2)
        assert await controller.stop_all(reason="maintenance") == 4
        assert await controller.stop_all() == 0  # all already stopping or stopped
        await controller.wait_all(5)
        assert (await controller.stats()).by_status == {"stopped": 4}


async def test_finished_runs_beyond_keep_finished_are_forgotten() -> None:
    async def quick(ctx) -> int:  # type: ignore[no-untyped-def]
        return 1

    async with Controller(keep_finished=3) as controller:
        controller.register("quick", quick)
        for index in range(6):
            await (await controller.submit("quick", task_id=f"q{index}")).wait(5)
        assert [s.task_id for s in await controller.list_tasks()] == ["q3", "q4", "q5"]
        assert (await controller.stats()).by_status == {"succeeded": 3}
