"""A third-party TaskStore that passes chongming's store contract.

``JournalingStore`` keeps its data in an ``InMemoryTaskStore`` and records
every write in a journal (think: a store that mirrors writes to an audit log).
Any backend is checked the same way: subclass ``StoreContract`` and implement
``make_store()``. In your test suite::

    from third_party_store import JournalingStoreContract

    class TestJournalingStore(JournalingStoreContract):
        pass

Run this file to see the store work: ``python docs/examples/third_party_store.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from datetime import datetime

from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import Command, TaskStore
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.nodes import CommandRecord, NodeInfo, NodeRecord, TaskCount
from chongming.stores.queue import ClaimedTask, Enqueued, Serves
from chongming.testing.store_contract import StoreContract, make_snapshot, next_step


class JournalingStore(TaskStore):
    """Delegates to an in-memory store and journals every successful write."""

    def __init__(self) -> None:
        self._inner = InMemoryTaskStore()
        self.journal: list[str] = []

    async def open(self) -> None:
        await self._inner.open()

    async def close(self) -> None:
        await self._inner.close()

    async def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        await self._inner.create(snapshot, transitions)
        self.journal.append(f"create {snapshot.task_id} v{snapshot.status_version}")

    async def save(
        self, snapshot: TaskSnapshot, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        await self._inner.save(snapshot, expect_version, transitions)
        self.journal.append(
            f"save {snapshot.task_id} v{expect_version}->v{snapshot.status_version}"
        )

    async def get(self, task_id: str) -> TaskSnapshot | None:
        return await self._inner.get(task_id)

    async def query(self, query: TaskQuery) -> list[TaskSnapshot]:
        return await self._inner.query(query)

    async def append(self, transitions: Sequence[Transition]) -> None:
        await self._inner.append(transitions)
        self.journal.extend(f"append {t.task_id} v{t.version}" for t in transitions)

    async def history(self, task_id: str) -> list[Transition]:
        return await self._inner.history(task_id)

    async def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat: datetime | None = None,
        owner: str | None = None,
    ) -> None:
        await self._inner.touch(task_id, progress=progress, heartbeat=heartbeat, owner=owner)

    async def submit_command(self, command: Command) -> None:
        await self._inner.submit_command(command)
        self.journal.append(f"command {command.kind} {command.task_id}")

    async def claim_commands(
        self, owner: str, *, lease_seconds: float, limit: int = 100
    ) -> list[Command]:
        return await self._inner.claim_commands(owner, lease_seconds=lease_seconds, limit=limit)

    async def complete_command(
        self, command_id: str, owner: str, outcome: str | None = None
    ) -> bool:
        return await self._inner.complete_command(command_id, owner, outcome)

    async def release_command(self, command_id: str, owner: str) -> bool:
        return await self._inner.release_command(command_id, owner)

    async def command_records(
        self, *, task_id: str | None = None, limit: int = 100
    ) -> list[CommandRecord]:
        return await self._inner.command_records(task_id=task_id, limit=limit)

    async def register_node(self, info: NodeInfo, *, ttl_seconds: float) -> NodeRecord:
        record = await self._inner.register_node(info, ttl_seconds=ttl_seconds)
        self.journal.append(f"node {info.owner}")
        return record

    async def renew_node(self, owner: str, incarnation: str, *, ttl_seconds: float) -> bool:
        return await self._inner.renew_node(owner, incarnation, ttl_seconds=ttl_seconds)

    async def release_node(self, owner: str, incarnation: str) -> None:
        await self._inner.release_node(owner, incarnation)

    async def nodes(self) -> list[NodeRecord]:
        return await self._inner.nodes()

    async def task_counts(self, *, active_only: bool = False) -> list[TaskCount]:
        return await self._inner.task_counts(active_only=active_only)

    async def enqueue(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        connection: object | None = None,
    ) -> Enqueued:
        result = await self._inner.enqueue(snapshot, transitions, connection=connection)
        if result.created:
            self.journal.append(f"enqueue {snapshot.task_id}")
        return result

    async def claim(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
    ) -> list[TaskSnapshot]:
        return await self._inner.claim(
            owner, serves=serves, buckets=buckets, limit=limit, exclude_tags=exclude_tags
        )

    async def claim_started(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        at: datetime,
    ) -> list[ClaimedTask]:
        return await self._inner.claim_started(
            owner, serves=serves, buckets=buckets, limit=limit, exclude_tags=exclude_tags, at=at
        )

    async def release_claim(self, task_id: str, owner: str, expect_version: int) -> bool:
        return await self._inner.release_claim(task_id, owner, expect_version)


class JournalingStoreContract(StoreContract):
    """The contract, bound to ``JournalingStore``; a test module subclasses it as ``Test*``."""

    async def make_store(self) -> TaskStore:
        return JournalingStore()


async def main() -> None:
    async with JournalingStore() as store:
        snapshot = make_snapshot("job-1", label="导出 2026-10-02")
        await store.create(snapshot)
        queued, transition = next_step(snapshot, TaskStatus.QUEUED)
        await store.save(queued, expect_version=0, transitions=[transition])
        print("\n".join(store.journal))


if __name__ == "__main__":
    asyncio.run(main())
