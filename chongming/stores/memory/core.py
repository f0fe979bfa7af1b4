"""The in-memory store's core: snapshots, the write-through batch, history, touch, counts."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from chongming.errors import DuplicateTaskId, StoreClosed, TaskNotFound, VersionConflict
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.state.status import ACTIVE_STATUSES
from chongming.stores.base import count_key
from chongming.stores.checks import check_made, check_time, check_transitions
from chongming.stores.codec import encode_progress
from chongming.stores.memory.state import MemoryState, _utc
from chongming.stores.nodes import TaskCount
from chongming.stores.ports.core import CoreStore
from chongming.stores.stored import as_stored, utc_transition
from chongming.stores.writes import WRITTEN, StateWrite, WriteOutcome, WriteResult

__all__ = ["CoreOnMemory"]


class CoreOnMemory(MemoryState, CoreStore):
    """Snapshots (compare-and-set), trusted and checked writes, history, the hot path."""

    async def open(self) -> None:
        self._check_open()

    async def close(self) -> None:
        self._closed = True
        if self._hint is not None:
            # Wake hint waiters so they poll, see StoreClosed and stop.
            self._hint.set()

    async def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        self._check_open()
        stored = as_stored(snapshot, self._limit)
        check_transitions(transitions)
        if snapshot.task_id in self._tasks:
            raise DuplicateTaskId(snapshot.task_id)
        self._tasks[snapshot.task_id] = stored
        self._append(transitions)

    async def save(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        self._check_open()
        stored = as_stored(snapshot, self._limit)
        check_transitions(transitions)
        current = self._tasks.get(snapshot.task_id)
        if current is None:
            raise TaskNotFound(snapshot.task_id)
        if current.status_version != expect_version:
            raise VersionConflict(snapshot.task_id, expect_version, current.status_version)
        self._stored(stored)
        self._append(transitions)

    async def apply_writes(self, writes: Sequence[StateWrite]) -> list[WriteResult]:
        """Trusted writes are stored as made (their records are in stored form already)."""
        if self._closed:
            raise StoreClosed("InMemoryTaskStore")
        tasks = self._tasks
        results: list[WriteResult] = []
        for write in writes:
            if not write.trusted:
                results.extend(await super().apply_writes([write]))
                continue
            snapshot = write.snapshot
            task_id = snapshot.task_id
            current = tasks.get(task_id)
            expect = write.expect_version
            if expect is None:
                if current is not None:
                    version = snapshot.status_version
                    results.append(await self._resent(write, version, _DUPLICATE))
                    continue
                check_made(snapshot)
            elif current is None:
                results.append(_NOT_FOUND)
                continue
            elif current.status_version != expect:
                version = current.status_version
                results.append(await self._resent(write, version, _CONFLICT))
                continue
            # in_stored_form(snapshot), inline: the runtime stamps UTC and keeps JSON forms.
            s = snapshot
            if not (
                s.created_at.tzinfo is UTC
                and s.updated_at.tzinfo is UTC
                and (s.queued_at is None or s.queued_at.tzinfo is UTC)
                and (s.started_at is None or s.started_at.tzinfo is UTC)
                and (s.finished_at is None or s.finished_at.tzinfo is UTC)
                and (s.last_heartbeat_at is None or s.last_heartbeat_at.tzinfo is UTC)
                and type(s.args) is tuple
                and type(s.kwargs) is dict
            ):
                s = as_stored(snapshot, None)
            if task_id in self._parents or task_id in self._facts:
                self._stored(s)  # a child's end, a park its fact wakes
            else:
                tasks[task_id] = s
            versions = self._history.get(task_id)
            if versions is None:
                versions = self._history[task_id] = {}
            for transition in write.transitions:
                if transition.version not in versions:
                    at_utc = transition.at.tzinfo is UTC
                    versions[transition.version] = (
                        transition if at_utc else utc_transition(transition)
                    )
            results.append(_WRITTEN)
        return results

    async def get(self, task_id: str) -> TaskSnapshot | None:
        self._check_open()
        return self._tasks.get(task_id)

    async def query(self, query: TaskQuery) -> list[TaskSnapshot]:
        self._check_open()
        found = sorted(
            (s for s in self._tasks.values() if query.matches(s)),
            key=lambda s: (s.created_at, s.task_id),
        )
        return found if query.limit is None else found[: query.limit]

    async def append(self, transitions: Sequence[Transition]) -> None:
        self._check_open()
        check_transitions(transitions)
        self._append(transitions)

    async def history(self, task_id: str) -> list[Transition]:
        self._check_open()
        versions = self._history.get(task_id, {})
        return [versions[v] for v in sorted(versions)]

    async def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat: datetime | None = None,
        owner: str | None = None,
    ) -> None:
        self._check_open()
        encode_progress(progress, self._limit)
        if heartbeat is not None:
            check_time(heartbeat, "heartbeat")
        current = self._tasks.get(task_id)
        if current is None or (progress is None and heartbeat is None):
            return
        if owner is not None and current.owner != owner:
            return  # taken over: a fenced-off attempt writes nothing
        self._tasks[task_id] = dataclasses.replace(
            current,
            progress=current.progress if progress is None else progress,
            last_heartbeat_at=current.last_heartbeat_at if heartbeat is None else _utc(heartbeat),
        )

    async def task_counts(self, *, active_only: bool = False) -> list[TaskCount]:
        self._check_open()
        counter = Counter(
            (s.status, s.bucket, s.owner)
            for s in self._tasks.values()
            if not active_only or s.status in ACTIVE_STATUSES
        )
        counts = [
            TaskCount(status=status, bucket=bucket, owner=owner, count=count)
            for (status, bucket, owner), count in counter.items()
        ]
        counts.sort(key=count_key)
        return counts


_WRITTEN = WRITTEN
_CONFLICT = WriteResult(outcome=WriteOutcome.CONFLICT)
_DUPLICATE = WriteResult(outcome=WriteOutcome.DUPLICATE)
_NOT_FOUND = WriteResult(outcome=WriteOutcome.NOT_FOUND)
