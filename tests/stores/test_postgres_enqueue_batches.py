"""Enqueues on PostgreSQL share statements; every caller still gets its own answer."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming.errors import DuplicateTaskId, IdempotencyConflict
from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.queue import Enqueued
from tests.stores.pg_support import PgStoreFactory, require_postgres

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


def _queued(task_id: str, **fields: Any) -> tuple[TaskSnapshot, Transition]:
    pending = TaskSnapshot(
        task_id=task_id,
        name=fields.pop("name", "job"),
        label=task_id,
        status=TaskStatus.PENDING,
        status_version=0,
        attempt=0,
        max_attempts=1,
        created_at=T0,
        updated_at=T0,
        **fields,
    )
    at = T0 + timedelta(seconds=1)
    queued, step = apply_transition(pending, TaskStatus.QUEUED, trigger="test:enqueued", at=at)
    return dataclasses.replace(queued, queued_at=at), step


async def _enqueue_all(store: Any, items: list[tuple[TaskSnapshot, Transition]]) -> list[Any]:
    return await asyncio.gather(
        *(store.enqueue(snapshot, [step]) for snapshot, step in items), return_exceptions=True
    )


def _count_batches(store: Any) -> list[int]:
    queue = store._queue
    run = queue._run_batch
    sizes: list[int] = []

    async def counting(batch: list[Any]) -> None:
        sizes.append(len(batch))
        await run(batch)

    queue._batcher._run = counting
    return sizes


async def test_concurrent_enqueues_share_statements_and_each_gets_its_answer(
    factory: PgStoreFactory,
) -> None:
    store = factory.make()
    await store.open()
    sizes = _count_batches(store)
    items = [_queued(f"t-{n:03d}", args=(n,)) for n in range(300)]
    items.append(_queued("t-007"))  # a repeated id: refused, alone
    items.append(_queued("k-1", idempotency_key="k", args=(1,)))
    items += [_queued("k-2", idempotency_key="k", args=(1,))]  # the same input: the first task
    items += [_queued("k-3", idempotency_key="k", args=(2,))]  # other input: a conflict
    answers = await _enqueue_all(store, items)
    assert len(sizes) < 20  # 304 enqueues in a few statements
    assert sum(sizes) == len(items)
    for n in range(300):
        answer = answers[n]
        assert isinstance(answer, Enqueued)
        assert answer.created
        assert answer.snapshot.task_id == f"t-{n:03d}"
        assert answer.snapshot.args == (n,)
        assert await store.history(f"t-{n:03d}") == [items[n][1]]
    assert isinstance(answers[300], DuplicateTaskId)
    first, twin, conflict = answers[301:]
    assert isinstance(first, Enqueued)
    assert first.created
    assert isinstance(twin, Enqueued)
    assert not twin.created
    assert twin.snapshot == first.snapshot
    assert isinstance(conflict, IdempotencyConflict)
    assert conflict.task_id == "k-1"
    assert await store.get("k-2") is None
    assert await store.get("k-3") is None


async def test_a_taken_id_with_a_free_key_rolls_the_batch_back_and_takes_no_key(
    factory: PgStoreFactory,
) -> None:
    store = factory.make()
    await store.enqueue(*_one("taken"))  # written before the batch
    sizes = _count_batches(store)
    items = [_queued(f"b-{n}") for n in range(5)] + [_queued("taken", idempotency_key="fresh")]
    answers = await _enqueue_all(store, items)
    assert sizes[0] == 6  # one batch, rolled back, then each alone
    assert [isinstance(a, Enqueued) and a.created for a in answers[:5]] == [True] * 5
    assert isinstance(answers[5], DuplicateTaskId)
    other = await store.enqueue(*_one("new", idempotency_key="fresh"))
    assert other.created  # the refused enqueue left the key free
    assert other.snapshot.task_id == "new"


def _one(task_id: str, **fields: Any) -> tuple[TaskSnapshot, list[Transition]]:
    snapshot, step = _queued(task_id, **fields)
    return snapshot, [step]


@pytest.mark.parametrize("committed", [True, False])
async def test_a_batch_whose_connection_breaks_is_resolved_task_by_task(
    factory: PgStoreFactory, committed: bool
) -> None:
    store = factory.make()
    await store.open()
    queue = store._queue
    once = queue._once
    broken: list[bool] = []

    async def breaking(what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        if broken or not what.startswith("enqueueing") or "tasks" not in what:
            return await once(what, work)
        broken.append(True)
        if committed:
            await once(what, work)  # it commits; the answer is lost
        raise ConnectionResetError("the connection broke")

    queue._once = breaking
    items = [_queued(f"c-{n}", idempotency_key=f"key-{n}") for n in range(6)]
    answers = await _enqueue_all(store, items)
    assert broken == [True]
    for n, answer in enumerate(answers):
        assert isinstance(answer, Enqueued), answer
        assert answer.created  # written exactly once, by this call, either way
        assert answer.snapshot.task_id == f"c-{n}"
        assert len(await store.history(f"c-{n}")) == 1
