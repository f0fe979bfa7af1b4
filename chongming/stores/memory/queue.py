"""The in-memory store's work queue and trace carriers."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime

from chongming.errors import ConfigurationError, DuplicateTaskId, IdempotencyConflict
from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.checks import check_time, check_transitions
from chongming.stores.durable import Fact, check_enqueue_facts
from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.carriers import CarrierStore
from chongming.stores.ports.queue import QueueStore
from chongming.stores.queue import (
    AGED_LEVELS,
    ClaimedTask,
    Enqueued,
    Serves,
    check_claim,
    check_enqueued,
    check_start_claimed,
    check_trace_carrier,
    input_digest,
)
from chongming.stores.stored import as_stored

__all__ = ["QueueOnMemory"]


def aged(candidates: list[TaskSnapshot], now: datetime, step: float) -> list[TaskSnapshot]:
    """Claimable tasks (in claim order) by effective priority, as an aged claim ranks them.

    Like the SQL stores: only the :data:`AGED_LEVELS` highest priority levels
    are ranked; the levels below keep their place after them.
    """
    levels = sorted({task.priority for task in candidates}, reverse=True)[:AGED_LEVELS]
    ranked = [task for task in candidates if task.priority >= levels[-1]] if levels else []
    rest = candidates[len(ranked) :]

    def effective(task: TaskSnapshot) -> tuple[int, datetime, str]:
        queued = task.queued_at or task.created_at
        waited = (now - queued).total_seconds()
        return (-(task.priority + math.floor(waited / step)), queued, task.task_id)

    return sorted(ranked, key=effective) + rest


class QueueOnMemory(MemoryState, QueueStore, CarrierStore):
    """Enqueue once per idempotency key, claim atomically (nothing is awaited)."""

    async def enqueue(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
        facts: Sequence[Fact] = (),
    ) -> Enqueued:
        self._check_open()
        if connection is not None:
            raise ConfigurationError(
                "the in-memory store has no transaction to join; enqueue without connection="
            )
        check_enqueued(snapshot)
        stored = as_stored(snapshot, self._limit)
        check_transitions(transitions)
        carrier = check_trace_carrier(trace_carrier)
        given = check_enqueue_facts(facts, snapshot.task_id, self._limit)
        key = snapshot.idempotency_key
        digest = input_digest(stored)
        if key is not None and key in self._keys:
            task_id, known = self._keys[key]
            if known != digest:
                raise IdempotencyConflict(key, task_id)
            if task_id in self._tasks:
                return Enqueued(snapshot=self._tasks[task_id], created=False)
        if snapshot.task_id in self._tasks:
            raise DuplicateTaskId(snapshot.task_id)
        self._tasks[snapshot.task_id] = stored
        self._append(transitions)
        if key is not None:
            self._keys[key] = (snapshot.task_id, digest)
        if carrier is not None:
            self._carriers[snapshot.task_id] = carrier
        if given:
            self._facts[snapshot.task_id] = {fact.name: fact for fact in given}
        return Enqueued(snapshot=stored, created=True)

    async def trace_carriers(self, task_ids: Collection[str]) -> dict[str, dict[str, str]]:
        self._check_open()
        carriers = self._carriers
        return {i: dict(carriers[i]) for i in task_ids if i in carriers}

    async def claim(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
    ) -> list[TaskSnapshot]:
        self._check_open()
        check_claim(owner, serves, buckets, limit, exclude_tags, tags, age_step)
        now = self._now()
        chosen = None if buckets is None else frozenset(buckets)
        excluded = frozenset(exclude_tags)
        pool = None if tags is None else frozenset(tags)

        def claimable(task: TaskSnapshot) -> bool:
            if task.status is not TaskStatus.QUEUED or task.owner is not None:
                return False
            if task.bucket is not None and chosen is not None and task.bucket not in chosen:
                return False
            if task.not_before is not None and task.not_before > now:
                return False
            if not excluded.isdisjoint(task.tags):
                return False
            if pool is not None and pool.isdisjoint(task.tags):
                return False
            versions = serves.get(task.name)
            return versions is not None and (task.version is None or task.version in versions)

        def order(task: TaskSnapshot) -> tuple[int, datetime, str]:
            return (-task.priority, task.queued_at or task.created_at, task.task_id)

        candidates = sorted(filter(claimable, self._tasks.values()), key=order)
        if age_step is not None:
            candidates = aged(candidates, now, age_step)
        taken = candidates[:limit]
        claimed = []
        for task in taken:
            mine = dataclasses.replace(task, owner=owner)
            self._tasks[task.task_id] = mine
            claimed.append(mine)
        return claimed

    async def claim_started(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
        at: datetime,
    ) -> list[ClaimedTask]:
        at = check_time(at, "at").astimezone(UTC)
        claimed = await self.claim(
            owner,
            serves=serves,
            buckets=buckets,
            limit=limit,
            exclude_tags=exclude_tags,
            tags=tags,
            age_step=age_step,
        )
        return self._start(claimed, at)  # nothing awaited since the claim: one atomic step

    def _start(self, claimed: list[TaskSnapshot], at: datetime) -> list[ClaimedTask]:
        started = []
        for task in claimed:
            queued_by = self._history[task.task_id].get(task.status_version)
            moved, transition = apply_transition(
                task,
                TaskStatus.STARTING,
                trigger=Trigger.DISPATCH,
                at=at,
                queued_by=None if queued_by is None else queued_by.trigger,
            )
            self._tasks[task.task_id] = moved
            self._append([transition])
            versions = self._history[task.task_id]
            history = tuple(versions[v] for v in sorted(versions))
            started.append(ClaimedTask(snapshot=moved, history=history))
        return started

    async def start_claimed(
        self, owner: str, claimed: Sequence[TaskSnapshot], *, at: datetime
    ) -> list[ClaimedTask]:
        self._check_open()
        pairs = check_start_claimed(owner, claimed)
        at = check_time(at, "at").astimezone(UTC)
        held = []
        for task_id, version in pairs:
            task = self._tasks.get(task_id)
            if (
                task is not None
                and task.owner == owner
                and task.status is TaskStatus.QUEUED
                and task.status_version == version
            ):
                held.append(task)
        return self._start(held, at)

    async def release_claim(self, task_id: str, owner: str, expect_version: int) -> bool:
        self._check_open()
        task = self._tasks.get(task_id)
        if (
            task is None
            or task.owner != owner
            or task.status is not TaskStatus.QUEUED
            or task.status_version != expect_version
        ):
            return False
        self._tasks[task_id] = dataclasses.replace(task, owner=None)
        return True
