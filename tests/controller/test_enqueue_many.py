"""Controller.enqueue_many: one bulk enqueue, checked once where the calls agree."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chongming import Controller
from chongming.errors import ConfigurationError, IdempotencyConflict
from chongming.state.status import TaskStatus


async def add(ctx: Any, a: int, b: int = 0) -> int:
    return a + b


async def test_every_call_becomes_a_queued_task_that_a_worker_runs(tmp_path: Any) -> None:
    path = tmp_path / "q.db"
    async with Controller(store=str(path), owner="client") as client:
        client.register("add", add)
        queued = await client.enqueue_many(
            "add", [((n,), {"b": 1}) for n in range(20)], priority=3, tags={"bulk"}
        )
        assert [q.snapshot.args for q in queued] == [(n,) for n in range(20)]
        assert len({q.task_id for q in queued}) == 20
        for q in queued:
            snapshot = q.snapshot
            assert (snapshot.status, snapshot.priority, snapshot.tags) == (
                TaskStatus.QUEUED,
                3,
                frozenset({"bulk"}),
            )
            assert await q.get() == snapshot
            history = await client.history(q.task_id)
            assert [(t.from_status, t.to_status) for t in history] == [
                (TaskStatus.PENDING, TaskStatus.QUEUED)
            ]
        worker = Controller(store=str(path), owner="worker", work=True, poll_interval=0.05)
        worker.register("add", add)
        async with worker:
            finals = await asyncio.gather(*(q.wait(timeout=30) for q in queued))
        assert [f.result for f in finals] == [n + 1 for n in range(20)]


async def test_arguments_that_do_not_fit_refuse_the_lot_before_anything_is_written(
    tmp_path: Any,
) -> None:
    async with Controller(store=str(tmp_path / "q.db"), owner="client") as client:
        client.register("add", add)
        with pytest.raises(ConfigurationError):
            await client.enqueue_many("add", [((1,), {}), ((), {"c": 2})])
        with pytest.raises(ConfigurationError):
            await client.enqueue_many("add", [((1,), {})], idempotency_keys=["a", "b"])
        assert await client.list_tasks() == []  # the first call fitted: not written either


async def test_a_conflicting_key_is_raised_or_returned_and_the_others_are_enqueued(
    tmp_path: Any,
) -> None:
    async with Controller(store=str(tmp_path / "q.db"), owner="client") as client:
        first = await client.enqueue("job", 1, idempotency_key="k")
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((1,), {}), ((2,), {}), ((3,), {})]
        answers = await client.enqueue_many(
            "job", calls, idempotency_keys=["k", "k", None], return_exceptions=True
        )
        twin, conflict, fresh = answers
        assert twin.task_id == first.task_id
        assert not twin.created
        assert isinstance(conflict, IdempotencyConflict)
        assert fresh.created
        with pytest.raises(IdempotencyConflict):
            await client.enqueue_many("job", [((9,), {})], idempotency_keys=["k"])
