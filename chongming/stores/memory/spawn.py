"""The in-memory store's ``spawn_child``: enqueue, link and record in one loop step."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from chongming.errors import ConfigurationError
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.children import SpawnedChild
from chongming.stores.durable import Fact, StepRecord, check_step
from chongming.stores.memory.durable import DurableOnMemory
from chongming.stores.memory.queue import QueueOnMemory

__all__ = ["SpawnOnMemory"]


class SpawnOnMemory(QueueOnMemory, DurableOnMemory):
    """Nothing here awaits anything that yields: the three writes are one atomic step."""

    async def spawn_child(
        self,
        parent_id: str,
        epoch: int,
        step: StepRecord,
        child: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        trace_carrier: Mapping[str, str] | None = None,
        facts: Sequence[Fact] = (),
    ) -> SpawnedChild:
        self._check_open()
        if child.idempotency_key is None:
            raise ConfigurationError("spawn_child needs a child with an idempotency key")
        check_step(parent_id, epoch, dataclasses.replace(step, value=child.task_id), self._limit)
        self._fence(parent_id, epoch)  # a stale attempt enqueues nothing
        enqueued = await self.enqueue(child, transitions, trace_carrier=trace_carrier, facts=facts)
        child_id = enqueued.snapshot.task_id
        parent = await self.link_child(parent_id, child_id)
        assert parent is not None  # this store always answers
        if parent != parent_id:
            return SpawnedChild(enqueued=enqueued, parent=parent, step=None)
        recorded = await self.record_step(
            parent_id, epoch, dataclasses.replace(step, value=child_id)
        )
        return SpawnedChild(enqueued=enqueued, parent=parent, step=recorded)
