"""ctx.as_completed on a worker, on SQLite and PostgreSQL: order of ends, replay, early exit.

Each child waits for a fact ``go`` that only its parent sends, one at a time
and only after it saw the previous child end: so the order the parent sees
is known, and it differs from the order the children were spawned in.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from chongming import (
    ChildEnd,
    ChildFailed,
    Controller,
    ExponentialBackoff,
    RetryPolicy,
    TaskContext,
    TaskStatus,
)
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]  # fixtures

RETRY_ONCE = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01))
ORDER = [2, 0, 3, 1]
ran: Counter[str] = Counter()
MAKER: list[StoreMaker] = []


@pytest.fixture(autouse=True)
def _maker(stores: StoreMaker) -> None:
    MAKER[:] = [stores]
    ran.clear()


async def gated(ctx: TaskContext, n: int) -> int:
    """A child that ends only once its parent sent it ``go``; n < 0 fails."""
    await ctx.wait_for_fact("go", timeout=60)
    ran[f"gated {n}"] += 1
    if n < 0:
        raise ValueError(f"child {n} broke")
    return n * 10


async def in_order(ctx: TaskContext, numbers: list[int], order: list[int]) -> Any:
    """Spawn one child per number; release them in ``order``, each after the last one ended."""
    handles = [await ctx.spawn("gated", n) for n in numbers]
    await ctx.signal(handles[order[0]].task_id, "go")
    seen: list[Any] = []
    async for end in ctx.as_completed(*handles):
        seen.append(end.value if end.ok else f"{end.status}: {end.message}")
        released = len(seen)
        if released < len(order):
            await ctx.signal(handles[order[released]].task_id, "go")
    if ctx.attempt == 1 and numbers[0] == 0:
        raise RuntimeError("the first attempt fails after every child ended")
    return {"seen": seen, "attempt": ctx.attempt}


async def first_then_rest(ctx: TaskContext, count: int) -> Any:
    """Take the first end, leave the loop, sleep, then gather them all."""
    handles = [await ctx.spawn("gated", n) for n in range(count)]
    for handle in handles:
        await ctx.signal(handle.task_id, "go")
    first: ChildEnd | None = None
    async for end in ctx.as_completed(*handles):
        first = end
        break
    assert first is not None
    await ctx.sleep("pause", 0.3)  # parks unless an abandoned child's end is already there
    return {"first": first.result(), "all": await ctx.gather(*handles)}


async def raises_on_failure(ctx: TaskContext) -> Any:
    handles = [await ctx.spawn("gated", n) for n in (1, -1)]
    for handle in handles:
        await ctx.signal(handle.task_id, "go")
    results = []
    async for end in ctx.as_completed(*handles, *handles):  # a repeated handle: once
        try:
            results.append(end.result())
        except ChildFailed as failed:
            results.append({"child": failed.child_id == handles[1].task_id, "st": failed.status})
    return results


async def not_a_handle(ctx: TaskContext) -> Any:
    async for _ in ctx.as_completed("nope"):  # type: ignore[arg-type]
        pass


async def not_durable(ctx: TaskContext) -> Any:
    async for _ in ctx.as_completed():
        pass


def _register(controller: Controller) -> None:
    controller.register("gated", gated, durable=True)
    controller.register("in_order", in_order, durable=True, retry=RETRY_ONCE)
    controller.register("first_then_rest", first_then_rest, durable=True)
    controller.register("raises_on_failure", raises_on_failure, durable=True)
    controller.register("not_a_handle", not_a_handle, durable=True)
    controller.register("not_durable", not_durable)


def _worker(where: object) -> Controller:
    return MAKER[0].one_slot_worker(where, _register)


def _client(where: object) -> Controller:
    return MAKER[0].client(where, _register)


async def _parks(client: Controller, task_id: str) -> int:
    return sum(step.trigger == "runtime:parked" for step in await client.history(task_id))


async def test_ends_come_in_the_order_the_children_ended_and_replay_the_same(
    where: object,
) -> None:
    async with _client(where) as client:
        parent = await client.enqueue("in_order", [0, 1, 2, 3], ORDER)
        async with _worker(where):  # one slot: parent and children park in turn
            done = await parent.wait(timeout=60)
        assert done.status is TaskStatus.SUCCEEDED
        # The second attempt found every child ended, yet replayed the order it saw
        # in the first (spawn order would be 0, 10, 20, 30).
        assert done.result == {"seen": [n * 10 for n in ORDER], "attempt": 2}
        assert ran == Counter({f"gated {n}": 1 for n in range(4)})
        assert await _parks(client, parent.task_id) >= len(ORDER)


async def test_a_failed_child_raises_only_from_result_and_a_repeated_handle_comes_once(
    where: object,
) -> None:
    async with _client(where) as client:
        parent = await client.enqueue("raises_on_failure")
        async with _worker(where):
            done = await parent.wait(timeout=60)
        assert done.status is TaskStatus.SUCCEEDED
        assert len(done.result) == 2  # in the order they ended, which the test leaves open
        assert 10 in done.result
        assert {"child": True, "st": "failed"} in done.result


async def test_leaving_the_loop_early_neither_loses_a_child_nor_wakes_the_parent_forever(
    where: object,
) -> None:
    async with _client(where) as client:
        parent = await client.enqueue("first_then_rest", 3)
        async with _worker(where):
            done = await parent.wait(timeout=60)
        assert done.status is TaskStatus.SUCCEEDED, done.failure
        assert done.result["all"] == [0, 10, 20]
        assert done.result["first"] in (0, 10, 20)
        # Parked for the first end at most once or twice; the sleep after the early
        # exit held the slot instead of parking and being woken again and again.
        assert await _parks(client, parent.task_id) <= 3


async def test_something_that_is_not_a_handle_is_refused_by_name(where: object) -> None:
    async with _client(where) as client:
        task = await client.enqueue("not_a_handle")
        async with _worker(where):
            done = await task.wait(timeout=30)
        assert done.status is TaskStatus.FAILED
        assert done.failure is not None
        assert "ctx.as_completed(): each argument must be a handle" in done.failure.message


async def test_a_task_that_is_not_durable_is_told_to_be(where: object) -> None:
    async with _client(where) as client:
        task = await client.enqueue("not_durable")
        async with _worker(where):
            done = await task.wait(timeout=30)
        assert done.failure is not None
        assert done.failure.exception_type == "CheckpointMisuse"
        assert "durable=True" in done.failure.message
