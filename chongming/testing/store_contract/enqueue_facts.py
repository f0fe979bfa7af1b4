"""Facts given to ``enqueue``: written with the task in one transaction, or not at all."""

from __future__ import annotations

import dataclasses

from chongming.errors import DuplicateTaskId, PayloadError
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.durable import Fact
from chongming.testing.store_contract._support import (
    ContractBase,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["EnqueueFactsContract"]


def _queued(task_id: str, **fields: object) -> tuple[TaskSnapshot, Transition]:
    pending = make_snapshot(task_id, **fields)
    queued, transition = next_step(pending, TaskStatus.QUEUED, trigger="orchestrator:enqueued")
    return dataclasses.replace(queued, queued_at=queued.updated_at), transition


class EnqueueFactsContract(ContractBase):
    """Optional: a store whose ``enqueue`` takes ``facts=`` (with durable facts).

    A store without it gets the facts by ``put_fact`` after the enqueue, which
    is not atomic: a crash between the two leaves a task without its facts.
    """

    async def test_the_facts_are_stored_with_their_task(self) -> None:
        async with self._store() as store:
            snapshot, step = _queued("f-1")
            given = [
                Fact(task_id="f-1", name="downloaded", payload={"bytes": 10}),
                Fact(task_id="f-1", name="approved", payload=True, key="alice"),
            ]
            assert (await store.enqueue(snapshot, [step], facts=given)).created
            assert [(f.name, f.payload, f.key) for f in await store.facts("f-1")] == [
                ("approved", True, "alice"),
                ("downloaded", {"bytes": 10}, None),
            ]

    async def test_bad_facts_are_refused_and_nothing_is_written(self) -> None:
        async with self._store() as store:
            for n, facts in enumerate(
                [
                    [Fact(task_id="other", name="a", payload=1)],  # for another task
                    [Fact(task_id="b-x", name="a", payload=1)] * 2,  # a name twice
                    [Fact(task_id="b-x", name="a", payload=float("nan"))],  # not JSON
                    [Fact(task_id="b-x", name="", payload=1)],  # no name
                    ["not a fact"],
                ]
            ):
                task_id = "b-x"
                snapshot, step = _queued(task_id)
                await _raises(PayloadError, store.enqueue(snapshot, [step], facts=facts))  # type: ignore[arg-type]
                assert await store.get(task_id) is None, n
            snapshot, step = _queued("b-y")
            await _raises(PayloadError, store.enqueue(snapshot, [step], facts="abc"))  # type: ignore[arg-type]
            assert await store.get("b-y") is None

    async def test_a_refused_enqueue_writes_none_of_its_facts(self) -> None:
        async with self._store() as store:
            first, step = _queued("d-1")
            await store.enqueue(first, [step])
            again, step = _queued("d-1", label="the same id again")
            late = [Fact(task_id="d-1", name="late", payload=1)]
            await _raises(DuplicateTaskId, store.enqueue(again, [step], facts=late))
            assert await store.facts("d-1") == []

    async def test_an_idempotency_twin_gets_none_of_the_facts(self) -> None:
        async with self._store() as store:
            first, step = _queued("k-1", idempotency_key="order-7")
            facts = [Fact(task_id="k-1", name="paid", payload=1)]
            assert (await store.enqueue(first, [step], facts=facts)).created
            twin, step = _queued("k-2", idempotency_key="order-7")
            other = [Fact(task_id="k-2", name="paid", payload=2)]
            answer = await store.enqueue(twin, [step], facts=other)
            assert (answer.created, answer.snapshot.task_id) == (False, "k-1")
            assert [(f.name, f.payload) for f in await store.facts("k-1")] == [("paid", 1)]
            assert await store.get("k-2") is None
