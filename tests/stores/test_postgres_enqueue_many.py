"""``enqueue_many`` on PostgreSQL: the lot in a few statements, each task answered on its own."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chongming.errors import DuplicateTaskId, IdempotencyConflict, PayloadError
from chongming.stores.queue import Enqueued
from tests.stores.pg_support import PgStoreFactory, admin_connection, require_postgres
from tests.stores.test_postgres_enqueue_batches import _count_batches, _queued

pytestmark = pytest.mark.postgres


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


async def test_many_enqueues_in_few_statements_with_an_answer_each(
    factory: PgStoreFactory,
) -> None:
    store = factory.make()
    await store.open()
    sizes = _count_batches(store)
    items: list[Any] = [_queued(f"t-{n:04d}", args=(n,)) for n in range(1200)]
    items.append(_queued("t-0007"))  # a repeated id: refused
    items.append(_queued("k-1", idempotency_key="k", args=(1,)))
    items.append(_queued("k-2", idempotency_key="k", args=(1,)))  # same input: the first task
    items.append(_queued("k-3", idempotency_key="k", args=(2,)))  # other input: a conflict
    answers = await store.enqueue_many([(snapshot, [step]) for snapshot, step in items])
    assert len(answers) == len(items)
    assert len(sizes) <= 5  # 1,204 enqueues: batches of up to 500 (+ what a batch defers)
    for n in (0, 499, 500, 1199):
        answer = answers[n]
        assert isinstance(answer, Enqueued)
        assert answer.created
        assert answer.snapshot == items[n][0] == await store.get(f"t-{n:04d}")
        assert await store.history(f"t-{n:04d}") == [items[n][1]]
    assert all(isinstance(a, Enqueued) and a.created for a in answers[:1200])
    assert isinstance(answers[1200], DuplicateTaskId)
    first, twin, conflict = answers[1201:]
    assert isinstance(first, Enqueued)
    assert first.created
    assert isinstance(twin, Enqueued)
    assert not twin.created
    assert twin.snapshot == first.snapshot
    assert isinstance(conflict, IdempotencyConflict)
    assert await store.get("k-2") is None
    async with admin_connection() as conn:
        stored = await conn.fetchval(f'SELECT count(*) FROM "{store.schema}".transitions')
    assert stored == 1201  # each created task with its first transition, nothing else
    await store.close()


async def test_a_bad_item_is_refused_before_anything_is_written(factory: PgStoreFactory) -> None:
    store = factory.make()
    await store.open()
    good, step = _queued("good")
    bad, bad_step = _queued("bad")
    bad = dataclasses.replace(bad, label="nul\x00")
    with pytest.raises(PayloadError):
        await store.enqueue_many([(good, [step]), (bad, [bad_step])])
    assert await store.get("good") is None
    await store.close()


async def test_inside_the_callers_transaction_they_commit_or_vanish_with_it(
    factory: PgStoreFactory,
) -> None:
    store = factory.make()
    await store.open()
    items = [_queued(f"tx-{n}") for n in range(3)]
    async with admin_connection() as conn:
        transaction = conn.transaction()
        await transaction.start()
        answers = await store.enqueue_many(
            [(snapshot, [step]) for snapshot, step in items], connection=conn
        )
        assert all(isinstance(a, Enqueued) and a.created for a in answers)
        await transaction.rollback()
        assert await store.get("tx-0") is None
        async with conn.transaction():
            await store.enqueue_many([(s, [t]) for s, t in items[:2]], connection=conn)
    assert await store.get("tx-1") is not None
    assert await store.get("tx-2") is None
    await store.close()


async def test_plain_enqueues_store_the_rows_and_histories_their_recipes_imply(
    factory: PgStoreFactory,
) -> None:
    """What ``Controller.enqueue`` makes goes by the recipe-only statement; nothing differs."""
    from chongming.clock import SYSTEM_CLOCK
    from chongming.controller.enqueue import EnqueueRequest, build_enqueued_many
    from chongming.stores.postgres.enqueues import is_plain
    from chongming.task_api.registry import TaskRegistry

    store = factory.make()
    await store.open()
    queue = store._queue
    sent: list[bool] = []
    run = queue._run_batch

    async def noting(batch: list[Any]) -> None:
        sent.append(all(p.plain for p in batch))
        await run(batch)

    queue._batcher._run = noting
    template = EnqueueRequest(name="job", args=(), kwargs={}, priority=2, tags={"a", "b"})
    calls: list[Any] = [((n,), {"k": "v"}) for n in range(10)]
    keys = [None] * 8 + ["key-1", "key-1"]  # one key, other arguments: a conflict
    built = build_enqueued_many(template, calls, keys, TaskRegistry(), SYSTEM_CLOCK, None)
    assert all(is_plain(snapshot, [step]) for snapshot, step in built)
    answers = await store.enqueue_many([(snapshot, [step]) for snapshot, step in built])
    assert sent == [True]  # one batch, all of it by the recipe-only statement
    for (snapshot, step), answer in zip(built[:9], answers[:9], strict=True):
        assert isinstance(answer, Enqueued)
        assert answer.created
        assert await store.get(snapshot.task_id) == snapshot
        assert await store.history(snapshot.task_id) == [step]
    assert isinstance(answers[9], IdempotencyConflict)
    assert await store.get(built[9][0].task_id) is None
    await store.close()
