"""Child tasks: a child names its parent, and its end is the parent's fact, in one write.

Optional for a third-party store: mix :class:`ChildContract` into a contract
subclass if the backend implements ``link_child`` (it needs the durable parts:
mix :class:`DurableContract` in too).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from chongming.errors import TaskNotFound
from chongming.state.records import Failure, FailureKind, TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.retention import PruneSelection
from chongming.testing.store_contract._support import _raises, make_snapshot, next_step
from chongming.testing.store_contract.durable import DurableContract

__all__ = ["ChildContract"]

_S = TaskStatus


class ChildContract(DurableContract):
    async def _queued(self, store: TaskStore, task_id: str) -> TaskSnapshot:
        snapshot = make_snapshot(task_id, name="charge")
        await store.create(snapshot)
        moved, transition = next_step(snapshot, _S.QUEUED)
        await store.save(moved, expect_version=snapshot.status_version, transitions=[transition])
        return moved

    async def _end(
        self, store: TaskStore, snapshot: TaskSnapshot, to: TaskStatus, **fields: Any
    ) -> TaskSnapshot:
        path = (_S.STARTING, _S.RUNNING, to) if to is not _S.STOPPED else (to,)
        for status in path:
            extra = fields if status is to else {}
            moved, transition = next_step(snapshot, status, owner="node-b", **extra)
            await store.save(
                moved, expect_version=snapshot.status_version, transitions=[transition]
            )
            snapshot = moved
        return snapshot

    async def test_a_child_names_its_parent_and_its_parent_lists_it(self) -> None:
        async with self._store() as store:
            await self._running(store, "p-1")
            for child in ("c-2", "c-1"):
                await self._queued(store, child)
                await store.link_child("p-1", child)
            await store.link_child("p-1", "c-1")  # again: a no-op
            assert await store.parent_of("c-1") == "p-1"
            assert await store.parent_of("p-1") is None
            assert await store.children_of("p-1") == ["c-1", "c-2"]
            assert await store.children_of("c-1") == []
            assert await store.facts("p-1") == []  # nothing ended yet

    async def test_a_link_answers_with_the_parent_the_child_has(self) -> None:
        async with self._store() as store:
            await self._running(store, "p-1")
            await self._running(store, "p-2")
            await self._queued(store, "c-1")
            assert await store.link_child("p-1", "c-1") == "p-1"
            assert await store.link_child("p-1", "c-1") == "p-1"  # again: the same answer
            # A second parent does not take the child; the answer says whose it is.
            assert await store.link_child("p-2", "c-1") == "p-1"
            assert await store.parent_of("c-1") == "p-1"
            assert await store.children_of("p-2") == []

    async def test_a_child_ending_writes_its_end_as_the_parents_fact(self) -> None:
        async with self._store() as store:
            await self._running(store, "p-1")
            ok, bad = await self._queued(store, "c-1"), await self._queued(store, "c-2")
            await store.link_child("p-1", "c-1")
            await store.link_child("p-1", "c-2")
            await self._end(store, ok, _S.SUCCEEDED, result={"paid": [1, 2]})
            failure = Failure(kind=FailureKind.EXCEPTION, message="card declined",
                              exception_type="ValueError")  # fmt: skip
            await self._end(store, bad, _S.FAILED, failure=failure)
            paid = await store.get_fact("p-1", "child:c-1")
            assert paid is not None
            assert paid.payload == {"status": "succeeded", "result": {"paid": [1, 2]},
                                    "failure": None}  # fmt: skip
            declined = await store.get_fact("p-1", "child:c-2")
            assert declined is not None
            assert declined.payload["status"] == "failed"
            assert declined.payload["failure"]["message"] == "card declined"
            assert declined.payload["failure"]["exception_type"] == "ValueError"

    async def test_a_child_that_ended_before_its_link_delivers_its_end_at_the_link(self) -> None:
        async with self._store() as store:
            await self._running(store, "p-1")
            await self._end(store, await self._queued(store, "c-1"), _S.SUCCEEDED, result=7)
            assert await store.get_fact("p-1", "child:c-1") is None
            await store.link_child("p-1", "c-1")
            found = await store.get_fact("p-1", "child:c-1")
            assert found is not None
            assert found.payload["result"] == 7

    async def test_a_stopped_queued_child_delivers_its_stop(self) -> None:
        async with self._store() as store:
            await self._running(store, "p-1")
            queued = await self._queued(store, "c-1")
            await store.link_child("p-1", "c-1")
            await self._end(store, queued, _S.STOPPED)
            found = await store.get_fact("p-1", "child:c-1")
            assert found is not None
            assert found.payload["status"] == "stopped"

    async def test_a_childs_end_wakes_its_parent_parked_for_it_only(self) -> None:
        async with self._store() as store:
            parked = await self._park(store, await self._waiting(store, "p-1", "child:c-1"))
            other = await self._park(store, await self._waiting(store, "p-2", "child:c-9"))
            first, second = await self._queued(store, "c-1"), await self._queued(store, "c-2")
            await store.link_child("p-1", "c-1")
            await store.link_child("p-2", "c-2")
            await self._end(store, first, _S.SUCCEEDED, result=1)
            await self._end(store, second, _S.SUCCEEDED, result=2)
            woken = await store.get("p-1")
            assert woken is not None
            assert woken.not_before is None
            assert (woken.status, woken.status_version) == (_S.QUEUED, parked.status_version)
            left = await store.get("p-2")  # its child ended, but it waits for another
            assert left is not None
            assert left.not_before == other.not_before
            assert await store.get_fact("p-2", "child:c-2") is not None

    async def test_linking_an_unknown_task_writes_nothing(self) -> None:
        async with self._store() as store:
            await self._running(store, "p-1")
            await self._queued(store, "c-1")
            await _raises(TaskNotFound, store.link_child("ghost", "c-1"))
            await _raises(TaskNotFound, store.link_child("p-1", "ghost"))
            assert await store.parent_of("c-1") is None
            assert await store.children_of("p-1") == []

    async def test_a_parent_is_not_pruned_while_a_child_of_its_lives(self) -> None:
        """Retention: a finished parent stays while its child runs, then both may go."""
        async with self._store() as store:
            parent = await self._running(store, "p-1")
            child = await self._queued(store, "c-1")
            await store.link_child("p-1", "c-1")
            # the parent was stopped and ended; its child is still queued
            ended, transition = next_step(parent, _S.SUCCEEDED, owner="node-a")
            await store.save(ended, expect_version=parent.status_version, transitions=[transition])
            assert ended.finished_at is not None
            everything = PruneSelection(finished_before=ended.finished_at + timedelta(days=1))
            assert await store.count_prunable(everything) == 0
            assert await store.prune_tasks(everything, limit=10) == 0
            assert await store.get("p-1") is not None
            await self._end(store, child, _S.SUCCEEDED, result=1)
            assert await store.count_prunable(everything) == 2
            assert await store.prune_tasks(everything, limit=10) == 2
            assert await store.get("p-1") is None
            assert await store.get("c-1") is None
