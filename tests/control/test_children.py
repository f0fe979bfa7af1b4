"""Child tasks on a worker, on SQLite and PostgreSQL: ctx.child, spawn/gather, replay, bad input.

The worker has one slot: a parent that held it while waiting would starve its
own child, so every test that finishes also shows the parent parked off it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chongming import (
    ChildCycle,
    ChildFailed,
    Controller,
    ExponentialBackoff,
    RetryPolicy,
    TaskContext,
    TaskStatus,
)
from chongming.testing.store_contract import make_snapshot, next_step
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]  # fixtures

RETRY_ONCE = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01))
ran: Counter[str] = Counter()
MAKER: list[StoreMaker] = []
#: The parent's attempts that ran its body (a parked attempt resumes under its number).
attempts_seen: set[int] = set()


@pytest.fixture(autouse=True)
def _maker(stores: StoreMaker) -> None:
    MAKER[:] = [stores]
    ran.clear()
    attempts_seen.clear()


async def charge(ctx: TaskContext, order: int, *, amount: int = 10) -> str:
    ran[f"charge {order}"] += 1
    if order < 0:
        raise ValueError(f"card declined for order {order}")
    return f"paid {amount} for {order}"


async def place(ctx: TaskContext, order: int) -> Any:
    try:
        return await ctx.child("charge", order, amount=order * 10)
    except ChildFailed as failed:
        return {"failed": failed.child_id, "status": failed.status, "message": failed.message}


async def fan_out(ctx: TaskContext, orders: list[int]) -> Any:
    handles = [await ctx.spawn("charge", order) for order in orders]
    try:
        return await ctx.gather(*handles)
    except ChildFailed as failed:
        return {"first failure": failed.message}


async def flaky_parent(ctx: TaskContext, order: int) -> Any:
    handle = await ctx.spawn("charge", order)
    attempts_seen.add(ctx.attempt)
    if ctx.attempt == 1:
        raise RuntimeError("the parent's first attempt fails after its child was enqueued")
    return await ctx.gather(handle)


async def bad_child(ctx: TaskContext, how: str) -> Any:
    if how == "unknown":
        return await ctx.child("no-such-task", 1)
    if how == "arguments":
        return await ctx.child("charge", 1, 2, 3)
    if how == "cycle":  # this task was enqueued as "bad" under key "k": naming it again
        return await ctx.child("bad", "cycle", key="k")
    raise AssertionError(how)


async def keyed(ctx: TaskContext) -> Any:
    return await ctx.child("charge", 4, key="charge:order-4")


async def same_key(ctx: TaskContext, order: int) -> Any:
    return await ctx.child("charge", order, key="charge:shared")


async def plain(ctx: TaskContext) -> Any:
    return await ctx.child("charge", 1)


async def relay(ctx: TaskContext, target: str) -> Any:
    queued = await ctx.enqueue("charge", 5)
    await ctx.signal(target, "hello", "from relay")
    return queued.task_id


def _register(controller: Controller) -> None:
    controller.register("charge", charge)
    controller.register("place", place, durable=True)
    controller.register("fan", fan_out, durable=True)
    controller.register("flaky", flaky_parent, durable=True, retry=RETRY_ONCE)
    controller.register("bad", bad_child, durable=True)
    controller.register("plain", plain)
    controller.register("keyed", keyed, durable=True)
    controller.register("same_key", same_key, durable=True)
    controller.register("relay", relay, durable=True)


def _worker(where: object) -> Controller:
    return MAKER[0].one_slot_worker(where, _register)


def _client(where: object) -> Controller:
    return MAKER[0].client(where, _register)


async def test_a_child_returns_its_result_and_a_failed_one_raises_child_failed(
    where: object,
) -> None:
    async with _client(where) as client:
        ok = await client.enqueue("place", 3)
        declined = await client.enqueue("place", -1)
        async with _worker(where):
            done = await ok.wait(timeout=30)
            failed = await declined.wait(timeout=30)
        assert (done.status, done.result) == (TaskStatus.SUCCEEDED, "paid 30 for 3")
        assert failed.status is TaskStatus.SUCCEEDED  # the parent caught ChildFailed
        assert isinstance(failed.result, dict)
        assert failed.result["status"] == "failed"
        assert failed.result["message"] == "card declined for order -1"
        store = client.store
        assert store is not None
        (child,) = await store.children_of(ok.task_id)
        assert await store.parent_of(child) == ok.task_id
        assert failed.result["failed"] == (await store.children_of(declined.task_id))[0]
        assert ran == Counter({"charge 3": 1, "charge -1": 1})


async def test_gather_answers_in_handle_order_and_raises_the_first_failure_after_all(
    where: object,
) -> None:
    async with _client(where) as client:
        fine = await client.enqueue("fan", list(range(8)))
        mixed = await client.enqueue("fan", [11, -2, 13, -4])
        async with _worker(where):
            done = await fine.wait(timeout=60)
            settled = await mixed.wait(timeout=60)
        assert done.result == [f"paid 10 for {order}" for order in range(8)]
        assert settled.result == {"first failure": "card declined for order -2"}
        # All settled first: every child of the mixed parent ran, once.
        for order in (11, -2, 13, -4):
            assert ran[f"charge {order}"] == 1
        store = client.store
        assert store is not None
        assert len(await store.children_of(fine.task_id)) == 8
        for child in await store.children_of(mixed.task_id):
            snapshot = await store.get(child)
            assert snapshot is not None
            assert snapshot.status.is_terminal


async def test_a_retried_parent_neither_enqueues_nor_runs_its_child_twice(where: object) -> None:
    async with _client(where) as client:
        parent = await client.enqueue("flaky", 7)
        async with _worker(where):
            done = await parent.wait(timeout=30)
        assert (done.status, done.attempt, done.result) == (
            TaskStatus.SUCCEEDED, 2, ["paid 10 for 7"],
        )  # fmt: skip
        assert attempts_seen == {1, 2}
        assert ran == Counter({"charge 7": 1})
        store = client.store
        assert store is not None
        assert len(await store.children_of(parent.task_id)) == 1
        names = Counter(snapshot.name for snapshot in await client.list_tasks())
        assert names == Counter({"flaky": 1, "charge": 1})


@pytest.mark.parametrize(
    ("how", "error", "says"),
    [
        ("unknown", "UnknownTask", "no-such-task"),
        ("arguments", "ConfigurationError", "arguments do not fit task 'charge'"),
        ("cycle", "ChildCycle", "an ancestor of this task"),
    ],
)
async def test_bad_child_input_fails_the_parent_naming_the_fix_and_writes_nothing(
    where: object, how: str, error: str, says: str
) -> None:
    async with _client(where) as client:
        parent = await client.enqueue("bad", how, idempotency_key="k")
        async with _worker(where):
            failed = await parent.wait(timeout=30)
        assert failed.status is TaskStatus.FAILED
        assert failed.failure is not None
        assert failed.failure.exception_type == error
        assert says in failed.failure.message
        assert [snapshot.name for snapshot in await client.list_tasks()] == ["bad"]
        store = client.store
        assert store is not None
        assert await store.children_of(parent.task_id) == []
        assert await store.steps(parent.task_id) == []


def test_child_cycle_is_a_configuration_error_naming_the_fix() -> None:
    error = ChildCycle("bad", "k", "t-1")
    assert isinstance(error, ValueError)
    assert "give the child another key" in str(error)


async def test_a_task_that_is_not_durable_is_told_to_register_durable(where: object) -> None:
    async with _client(where) as client:
        task = await client.enqueue("plain")
        async with _worker(where):
            failed = await task.wait(timeout=30)
        assert failed.failure is not None
        assert failed.failure.exception_type == "CheckpointMisuse"
        assert "durable=True" in failed.failure.message
        assert [snapshot.name for snapshot in await client.list_tasks()] == ["plain"]


async def test_a_task_reaches_its_plane_through_its_context(where: object) -> None:
    async with _client(where) as client:
        target = await client.enqueue("charge", 99, not_before=None)
        task = await client.enqueue("relay", target.task_id)
        async with _worker(where):
            done = await task.wait(timeout=30)
            assert done.status is TaskStatus.SUCCEEDED
            enqueued = await client.get(str(done.result))
            assert enqueued.name == "charge"
        facts = await client.facts(target.task_id)
        assert [(fact.name, fact.payload) for fact in facts] == [("hello", "from relay")]


async def test_child_waits_need_no_sleep_to_be_woken(where: object) -> None:
    """Many parents, one slot: each parks, its child's end wakes it (no recheck interval)."""
    async with _client(where) as client:
        parents = [await client.enqueue("place", order) for order in range(1, 6)]
        async with _worker(where):
            finals = await asyncio.wait_for(
                asyncio.gather(*(parent.wait(timeout=30) for parent in parents)), 30
            )
        assert [final.result for final in finals] == [
            f"paid {order * 10} for {order}" for order in range(1, 6)
        ]


async def hold(ctx: TaskContext, n: int) -> str:
    ran[f"hold {n}"] += 1
    while True:  # until stopped
        await ctx.checkpoint()
        await asyncio.sleep(0.01)


async def holds(ctx: TaskContext, count: int) -> Any:
    return await ctx.gather(*[await ctx.spawn("hold", n) for n in range(count)])


async def _status_of(client: Controller, task_id: str, status: TaskStatus) -> None:
    while (await client.get(task_id)).status is not status:
        await asyncio.sleep(0.02)


async def test_stopping_a_parent_stops_its_unfinished_children_with_its_reason(
    where: object,
) -> None:
    async with _client(where) as client:
        client.register("hold", hold)
        client.register("holds", holds, durable=True)
        parent = await client.enqueue("holds", 3)
        async with _worker(where) as worker:
            worker.register("hold", hold)
            worker.register("holds", holds, durable=True)
            store = client.store
            assert store is not None
            while len(children := await store.children_of(parent.task_id)) < 3:
                await asyncio.sleep(0.02)
            # One slot: the parent parked, the first child runs, two wait queued.
            await asyncio.wait_for(_wait_one_running(client, children), 30)
            assert await client.stop(parent.task_id, reason="order cancelled")
            for child in children:
                await asyncio.wait_for(_status_of(client, child, TaskStatus.STOPPED), 30)
            stopped = await parent.wait(timeout=30)
        assert stopped.status is TaskStatus.STOPPED
        for child in children:
            history = await client.history(child)
            assert history[-1].to_status is TaskStatus.STOPPED
            assert history[-1].reason == "order cancelled"
        assert sum(ran.values()) == 1  # the queued children never started


async def spawns_then_fails(ctx: TaskContext, count: int) -> Any:
    for n in range(count):
        await ctx.spawn("hold", n)
    raise LookupError("the order is gone")


async def test_a_parent_that_fails_stops_its_unfinished_children(where: object) -> None:
    """Nobody is left to gather them: they end ``stopped``, naming the parent's end."""
    async with _client(where) as client:
        parent = await client.enqueue("spawns_then_fails", 3)
        async with _worker(where) as worker:
            worker.register("hold", hold)
            worker.register("spawns_then_fails", spawns_then_fails, durable=True)
            final = await parent.wait(timeout=30)
            store = client.store
            assert store is not None
            children = await store.children_of(parent.task_id)
            assert len(children) == 3
            for child in children:
                await asyncio.wait_for(_status_of(client, child, TaskStatus.STOPPED), 30)
        assert final.status is TaskStatus.FAILED
        for child in children:
            history = await client.history(child)
            assert history[-1].reason == f"its parent {parent.task_id!r} ended failed"
            assert history[-1].actor == "system"


async def spawns_then_holds(ctx: TaskContext) -> Any:
    await ctx.spawn("hold", 0)
    while True:  # until stopped
        await ctx.checkpoint()
        await asyncio.sleep(0.01)


async def test_a_stop_that_reaches_a_parent_by_any_path_stops_its_children(
    where: object,
) -> None:
    """The run itself is stopped on its worker (no controller cascade ran): a child it
    spawned after a cascade, say, is stopped by its worker once the parent's end is in."""
    async with _client(where) as client:
        parent = await client.enqueue("spawns_then_holds")
        async with _worker(where) as worker:
            worker.register("hold", hold)
            worker.register("spawns_then_holds", spawns_then_holds, durable=True)
            store = client.store
            assert store is not None
            while not (children := await store.children_of(parent.task_id)):
                await asyncio.sleep(0.02)
            await _status_of(client, parent.task_id, TaskStatus.RUNNING)
            run = worker._host.get(parent.task_id)
            assert run is not None
            assert await run.stop(reason="from its own worker")  # TaskRun.stop: no cascade
            (child,) = children
            await asyncio.wait_for(_status_of(client, child, TaskStatus.STOPPED), 30)
        history = await client.history(child)
    assert history[-1].reason == f"its parent {parent.task_id!r} ended stopped"


async def test_a_parent_a_reconcile_ends_stops_its_unfinished_children(where: object) -> None:
    """Its worker died (no lease) while it ran: ``lost``, and its queued child is stopped."""
    async with _client(where) as client:
        store = client.store
        assert store is not None
        parent = make_snapshot("p-dead", name="plain")
        await store.create(parent)
        for to in (TaskStatus.QUEUED, TaskStatus.STARTING, TaskStatus.RUNNING):
            moved, step = next_step(parent, to, owner="ghost")  # a node with no lease
            await store.save(moved, expect_version=parent.status_version, transitions=[step])
            parent = moved
        child = make_snapshot("c-left", name="plain")
        await store.create(child)
        queued, step = next_step(child, TaskStatus.QUEUED)
        await store.save(queued, expect_version=0, transitions=[step])
        await store.link_child("p-dead", "c-left")
        report = await client.reconcile()
        assert [entry.task_id for entry in report.lost] == ["p-dead"]
        left = await client.get("c-left")
        history = await client.history("c-left")
    assert left.status is TaskStatus.STOPPED
    assert history[-1].reason == "its parent 'p-dead' ended lost"


async def _wait_one_running(client: Controller, children: list[str]) -> None:
    while True:
        found = [await client.get(child) for child in children]
        if any(snapshot.status is TaskStatus.RUNNING for snapshot in found):
            return
        await asyncio.sleep(0.02)


async def test_chongming_status_names_a_childs_parent_and_a_parents_children(
    tmp_path: Path,
) -> None:
    from tests.cli.support import as_json, invoke

    db = tmp_path / "family.db"
    async with _client(db) as client:
        parent = await client.enqueue("place", 2)
        async with _worker(db):
            await parent.wait(timeout=30)
        store = client.store
        assert store is not None
        (child,) = await store.children_of(parent.task_id)
    # The CLI opens the file itself, in a thread: this loop must not hold it meanwhile.
    up = as_json(await asyncio.to_thread(invoke, db, "status", parent.task_id, "--json"))
    assert (up["task"]["parent_id"], up["task"]["children"]) == (None, [child])
    down = await asyncio.to_thread(invoke, db, "status", child)
    assert f"parent:   {parent.task_id}" in down.stdout


async def test_a_key_that_names_another_parents_child_fails_instead_of_waiting_forever(
    where: object,
) -> None:
    async with _client(where) as client:
        first = await client.enqueue("keyed")
        async with _worker(where):
            done = await first.wait(timeout=30)
            second = await client.enqueue("keyed")
            failed = await second.wait(timeout=30)
        assert done.result == "paid 10 for 4"
        assert failed.status is TaskStatus.FAILED
        assert failed.failure is not None
        assert "a child has one parent: give this child a key of its own" in failed.failure.message
        assert ran == Counter({"charge 4": 1})


async def test_a_spawn_the_store_refuses_is_a_recorded_step_failure(where: object) -> None:
    async with _client(where) as client:
        first = await client.enqueue("same_key", 1)
        async with _worker(where):
            assert (await first.wait(timeout=30)).result == "paid 10 for 1"
            # The same key with other input: the store refuses the enqueue.
            second = await client.enqueue("same_key", 2)
            failed = await second.wait(timeout=30)
        assert failed.status is TaskStatus.FAILED
        assert failed.failure is not None
        assert failed.failure.exception_type == "StepFailed"
        assert "IdempotencyConflict" in failed.failure.message
        store = client.store
        assert store is not None
        (step,) = [s for s in await store.steps(second.task_id) if s.name == "child:enqueue"]
        assert not step.ok  # recorded: a replay fails the same, without enqueueing
        assert await store.children_of(second.task_id) == []
        assert ran == Counter({"charge 1": 1})
