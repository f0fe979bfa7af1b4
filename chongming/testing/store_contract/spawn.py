"""``spawn_child``: a child enqueued, linked and its parent's step recorded, all or nothing.

Optional for a third-party store: mix :class:`SpawnContract` into a contract
subclass if the backend overrides ``spawn_child`` (without it ``ctx.spawn``
makes three calls). It needs the child parts: it is a :class:`ChildContract`.
"""

from __future__ import annotations

import dataclasses

from chongming.errors import ConfigurationError
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.durable import Fact, StaleEpoch, StepRecord
from chongming.testing.store_contract._support import _raises
from chongming.testing.store_contract.children import ChildContract
from chongming.testing.store_contract.queue import _queued

__all__ = ["SpawnContract"]

_S = TaskStatus
_STEP = StepRecord(name="child:enqueue", occurrence=0, ok=True, value=None)


def _child(task_id: str, key: str | None = "p-1:child:0") -> tuple[TaskSnapshot, Transition]:
    snapshot, transition = _queued(task_id, name="charge", args=(4,))
    return dataclasses.replace(snapshot, idempotency_key=key), transition


class SpawnContract(ChildContract):
    async def _parent(self, store: TaskStore, task_id: str = "p-1") -> int:
        await self._running(store, task_id)
        return await store.begin_durable_attempt(task_id, "node-a", max_resumes=3)

    async def test_a_spawn_enqueues_links_and_records_at_once(self) -> None:
        async with self._store() as store:
            epoch = await self._parent(store)
            child, transition = _child("c-1")
            spawned = await store.spawn_child("p-1", epoch, _STEP, child, [transition])
            assert spawned.enqueued.created
            assert spawned.enqueued.snapshot.task_id == "c-1"
            assert spawned.enqueued.snapshot.status is _S.QUEUED
            assert spawned.enqueued.snapshot == await store.get("c-1")  # as stored
            assert spawned.parent == "p-1"
            assert spawned.step is not None
            assert (spawned.step.value, spawned.step.epoch) == ("c-1", epoch)
            assert await store.parent_of("c-1") == "p-1"
            assert [step.value for step in await store.steps("p-1")] == ["c-1"]
            assert [t.to_status for t in await store.history("c-1")] == [_S.QUEUED]

    async def test_a_spawn_again_finds_its_twin_and_its_record(self) -> None:
        async with self._store() as store:
            epoch = await self._parent(store)
            child, transition = _child("c-1")
            first = await store.spawn_child("p-1", epoch, _STEP, child, [transition])
            again_child, again_transition = _child("c-other")  # a new id, the same key
            again = await store.spawn_child("p-1", epoch, _STEP, again_child, [again_transition])
            assert not again.enqueued.created
            assert again.enqueued.snapshot.task_id == "c-1"
            assert again.step == first.step
            assert await store.get("c-other") is None
            assert len(await store.steps("p-1")) == 1

    async def test_a_spawn_writes_the_childs_first_facts_and_a_twin_none(self) -> None:
        async with self._store() as store:
            epoch = await self._parent(store)
            child, transition = _child("c-1")
            given = [Fact(task_id="c-1", name="upstream", payload={"fetch": [1, 2]})]
            await store.spawn_child("p-1", epoch, _STEP, child, [transition], facts=given)
            twin, twin_transition = _child("c-2")
            other = [Fact(task_id="c-2", name="upstream", payload="other")]
            await store.spawn_child("p-1", epoch, _STEP, twin, [twin_transition], facts=other)
            assert [(f.name, f.payload) for f in await store.facts("c-1")] == [
                ("upstream", {"fetch": [1, 2]})
            ]
            assert await store.facts("c-2") == []

    async def test_a_stale_attempt_spawns_nothing(self) -> None:
        async with self._store() as store:
            old = await self._parent(store)
            await store.begin_durable_attempt("p-1", "node-a", max_resumes=3)
            child, transition = _child("c-1")
            await _raises(StaleEpoch, store.spawn_child("p-1", old, _STEP, child, [transition]))
            assert await store.get("c-1") is None
            assert await store.steps("p-1") == []

    async def test_a_twin_of_another_parent_is_neither_taken_nor_recorded(self) -> None:
        async with self._store() as store:
            other = await self._parent(store, "p-2")
            epoch = await self._parent(store, "p-1")
            child, transition = _child("c-1", key="shared")
            await store.spawn_child("p-2", other, _STEP, child, [transition])
            twin, twin_transition = _child("c-2", key="shared")
            spawned = await store.spawn_child("p-1", epoch, _STEP, twin, [twin_transition])
            assert (spawned.parent, spawned.step) == ("p-2", None)
            assert spawned.enqueued.snapshot.task_id == "c-1"
            assert await store.steps("p-1") == []
            assert await store.children_of("p-1") == []

    async def test_a_child_without_a_key_is_refused_and_nothing_written(self) -> None:
        async with self._store() as store:
            epoch = await self._parent(store)
            child, transition = _child("c-1", key=None)
            await _raises(
                ConfigurationError, store.spawn_child("p-1", epoch, _STEP, child, [transition])
            )
            assert await store.get("c-1") is None
            assert await store.steps("p-1") == []
