"""Enqueue by name: a task persisted with its recipe for whichever node serves it.

``submit`` runs a task here; ``enqueue`` only writes it down: a ``queued`` row
holding the registered name, the version, the JSON arguments, the priority,
the bucket and the earliest start, with its first transition
(``pending -> queued``, ``orchestrator:enqueued``). A worker that owns the
bucket and serves the name and version claims it and runs it through the
ordinary state machine. The enqueuing process needs no registration and runs
nothing; :class:`~chongming.controller.queued.QueuedTask` follows the task through the store.

Observers may hand a trace carrier to store with the task
(:meth:`Observer.trace_carrier <chongming.controller.observers.Observer.trace_carrier>`):
it goes to the store in the same write, so the attempt on whichever node
claims the task continues the enqueuer's trace. A broken carrier is dropped
(the fan-out logs it); it never fails an enqueue.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chongming.clock import Clock
from chongming.controller.enqueue_rows import (
    ENQUEUED,
    EnqueueRequest,
    build_enqueued,
    build_enqueued_many,
)
from chongming.controller.facts import check_facts
from chongming.controller.queued import QueuedTask
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.durable import Fact, StepRecord
from chongming.stores.queue import Enqueued
from chongming.task_api.registry import TaskRegistry

if TYPE_CHECKING:
    from chongming.controller.observers import Observers
    from chongming.controller.served import ServedVersions
    from chongming.controller.worker import Worker
    from chongming.plane.plane import ControlPlane
    from chongming.scheduler.buckets import BucketPolicy
    from chongming.stores.base import TaskStore
    from chongming.stores.children import SpawnedChild

__all__ = [
    "ENQUEUED",
    "EnqueueCalls",
    "EnqueueRequest",
    "build_enqueued",
    "build_enqueued_many",
    "queued_tasks",
    "store_enqueue",
    "store_enqueue_many",
]

_log = logging.getLogger("chongming.controller")


async def store_enqueue_many(
    store: TaskStore,
    items: Sequence[tuple[TaskSnapshot, Transition]],
    *,
    connection: object | None,
    observers: Observers | None,
) -> list[Enqueued | Exception]:
    """``store.enqueue_many`` with the observers' trace carrier (see :func:`store_enqueue`)."""
    pairs = [(snapshot, [transition]) for snapshot, transition in items]
    carrier = None if observers is None else observers.trace_carrier()
    if carrier is None or not _takes(type(store), "trace_carrier"):
        return await store.enqueue_many(pairs, connection=connection)
    return await store.enqueue_many(pairs, connection=connection, trace_carrier=carrier)


def queued_tasks(
    store: TaskStore,
    results: Sequence[Enqueued | Exception],
    *,
    poll: float,
    return_exceptions: bool,
) -> list[Any]:
    """A :class:`QueuedTask` per enqueued task; the first error raised, unless returned."""
    if not return_exceptions:
        for result in results:
            if isinstance(result, Exception):
                raise result
    return [
        result
        if isinstance(result, Exception)
        else QueuedTask(store, result.snapshot, created=result.created, poll=poll)
        for result in results
    ]


async def store_enqueue(
    store: TaskStore,
    snapshot: TaskSnapshot,
    transitions: Sequence[Transition],
    *,
    connection: object | None,
    observers: Observers | None,
    facts: Mapping[str, Any] | None = None,
) -> Enqueued:
    """``store.enqueue`` with the observers' trace carrier, when there is one, and ``facts``.

    A store whose ``enqueue`` predates the ``trace_carrier`` parameter (a
    third-party one) is called without it: the task is enqueued all the
    same, and its attempt starts a trace of its own. One that predates
    ``facts`` gets them by ``put_fact`` after a created enqueue (not atomic).
    """
    carrier = None if observers is None else observers.trace_carrier()
    extra: dict[str, Any] = {}
    if carrier is not None and _takes(type(store), "trace_carrier"):
        extra["trace_carrier"] = carrier
    late = None
    if facts:
        given = [Fact(task_id=snapshot.task_id, name=n, payload=p) for n, p in facts.items()]
        if _takes(type(store), "facts"):
            extra["facts"] = given
        else:
            late = given
    result = await store.enqueue(snapshot, transitions, connection=connection, **extra)
    if late is not None and result.created:
        for fact in late:
            await store.put_fact(fact)
    return result


@functools.cache
def _takes(kind: type[TaskStore], parameter: str) -> bool:
    """Whether ``kind.enqueue`` takes ``parameter`` (a third-party store's may predate it)."""
    try:
        parameters = inspect.signature(kind.enqueue).parameters
    except (TypeError, ValueError):
        return False
    return parameter in parameters or any(
        found.kind is inspect.Parameter.VAR_KEYWORD for found in parameters.values()
    )


class EnqueueCalls:
    """:meth:`enqueue` and :meth:`enqueue_many`: a mixin of the controller."""

    registry: TaskRegistry
    clock: Clock
    max_payload_bytes: int | None
    poll_interval: float
    buckets: BucketPolicy
    _served: ServedVersions | None
    _observers: Observers | None
    _worker: Worker | None

    if TYPE_CHECKING:  # the controller's

        async def _open(self) -> None: ...

        def _require_plane(self, what: str) -> ControlPlane: ...

    async def enqueue(
        self,
        name: str,
        *args: Any,
        task_id: str | None = None,
        label: str | None = None,
        bucket_key: str | None = None,
        priority: int | None = None,
        tags: Collection[str] | None = None,
        not_before: datetime | None = None,
        idempotency_key: str | None = None,
        version: int | None = None,
        connection: object | None = None,
        facts: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> QueuedTask:
        """Persist a ``queued`` task for whichever node serves ``name`` (see docs/work-queue.md).

        Needs a store; needs no registration (an unregistered name waits,
        visibly, until a worker serves it; a registered one is checked against
        its function now). This controller runs it only if it is itself a
        worker (``work=True``) that claims it. The same ``idempotency_key``
        with the same input returns the existing task (``created`` is False);
        with other input it raises :class:`IdempotencyConflict`.

        ``connection``: your own connection inside your open transaction, on
        the store's database (asyncpg on PostgreSQL; aiosqlite on the SQLite
        store's file): the task exists if and only if your transaction commits.
        ``facts``: facts the task starts with (see :meth:`signal`), written in
        the same transaction as the task: it exists with all of them or not at
        all (not with ``connection``; a duplicate writes none).
        """
        plane, snapshot, transition = await self._built(
            name,
            args,
            kwargs,
            wait_for_version=connection is None,
            task_id=task_id,
            label=label,
            bucket_key=bucket_key,
            priority=priority,
            tags=tags,
            not_before=not_before,
            idempotency_key=idempotency_key,
            version=version,
        )
        check_facts(facts, connection)
        # The task and its facts in one transaction; a duplicate (the key named a
        # twin) gets none: its facts were the first enqueue's to write.
        result = await store_enqueue(
            plane.store,
            snapshot,
            [transition],
            connection=connection,
            observers=self._observers,
            facts=facts,
        )
        if self._worker is not None:
            self._worker.wake()
        return QueuedTask(
            plane.store, result.snapshot, created=result.created, poll=self.poll_interval
        )

    async def enqueue_child(
        self,
        parent_id: str,
        epoch: int,
        step: StepRecord,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        idempotency_key: str,
        facts: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> SpawnedChild:
        """``ctx.spawn``'s enqueue: built as :meth:`enqueue` builds, written with the step.

        One store call (:meth:`~chongming.stores.ports.durable.DurableStore.spawn_child`):
        the child, its link to ``parent_id`` and the parent's ``step``. Only
        called for a store that has it (``plane/children.py`` asks first); the
        port's default raises ``SpawnsInThreeCalls`` before anything is written.
        """
        plane, snapshot, transition = await self._built(
            name, args, kwargs, wait_for_version=True, idempotency_key=idempotency_key, **options
        )
        carrier = None if self._observers is None else self._observers.trace_carrier()
        check_facts(facts, None)
        child_id = snapshot.task_id
        given = [Fact(task_id=child_id, name=n, payload=p) for n, p in (facts or {}).items()]
        spawned = await plane.store.spawn_child(
            parent_id, epoch, step, snapshot, [transition], trace_carrier=carrier, facts=given
        )
        if self._worker is not None:
            self._worker.wake()
        return spawned

    async def _built(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        wait_for_version: bool,
        task_id: str | None = None,
        label: str | None = None,
        bucket_key: str | None = None,
        priority: int | None = None,
        tags: Collection[str] | None = None,
        not_before: datetime | None = None,
        idempotency_key: str | None = None,
        version: int | None = None,
    ) -> tuple[ControlPlane, TaskSnapshot, Transition]:
        """The checked task an enqueue writes, and the plane it goes to (bad input raises)."""
        await self._open()
        plane = self._require_plane("enqueue")
        bucket = None if bucket_key is None else self.buckets.bucket_for(bucket_key)
        served = self._served
        if version is None and served and isinstance(name, str) and name not in self.registry:
            version = await served.highest(name, wait=wait_for_version)
        request = EnqueueRequest(
            name=name,
            args=args,
            kwargs=kwargs,
            task_id=task_id,
            label=label,
            bucket=bucket,
            bucket_key=bucket_key,
            priority=priority,
            tags=tags,
            not_before=not_before,
            idempotency_key=idempotency_key,
            version=version,
        )
        snapshot, transition = build_enqueued(
            request, self.registry, self.clock, self.max_payload_bytes
        )
        return plane, snapshot, transition

    async def enqueue_many(
        self,
        name: str,
        calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]],
        *,
        label: str | None = None,
        bucket_key: str | None = None,
        priority: int | None = None,
        tags: Collection[str] | None = None,
        not_before: datetime | None = None,
        idempotency_keys: Sequence[str | None] | None = None,
        version: int | None = None,
        connection: object | None = None,
        return_exceptions: bool = False,
    ) -> list[Any]:
        """:meth:`enqueue` of ``name`` once per ``(args, kwargs)`` in ``calls``, written together.

        What the calls share is checked once; every call is checked before
        anything is written. Each task is enqueued on its own (an idempotency
        key's twin, a taken id): the first such error is raised once all are
        settled, or returned in its place with ``return_exceptions=True``.
        """
        await self._open()
        plane = self._require_plane("enqueue_many")
        served = self._served
        if version is None and served and isinstance(name, str) and name not in self.registry:
            version = await served.highest(name, wait=connection is None)
        bucket = None if bucket_key is None else self.buckets.bucket_for(bucket_key)
        template = EnqueueRequest(
            name=name, args=(), kwargs={}, label=label, bucket=bucket, bucket_key=bucket_key,
            priority=priority, tags=tags, not_before=not_before, version=version,
        )  # fmt: skip
        items = build_enqueued_many(
            template, list(calls), idempotency_keys, self.registry, self.clock,
            self.max_payload_bytes,
        )  # fmt: skip
        results = await store_enqueue_many(
            plane.store, items, connection=connection, observers=self._observers
        )
        if self._worker is not None:
            self._worker.wake()
        return queued_tasks(
            plane.store, results, poll=self.poll_interval, return_exceptions=return_exceptions
        )
