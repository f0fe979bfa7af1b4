"""Child tasks of a durable task: a memoised enqueue, then a wait for the child's end.

``ctx.spawn(name, ...)`` enqueues the child by registered name (any worker
that serves it may run it) inside a memoised step, ``child:enqueue``: its
idempotency key is the caller's ``key`` or ``<parent id>:child:<occurrence>``,
the same in every attempt, so a replay neither enqueues twice nor, once the
step is recorded, enqueues at all. The step also links the child to its
parent in the store; from then on the child's terminal transaction writes the
parent's fact ``child:<child id>`` (:mod:`chongming.stores.children`) and
wakes the parent if it is parked for it. Waiting for a child is a fact wait
without a deadline: on a worker the parent parks off its slot until the child
ends; the outcome is recorded once and replays the same.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from chongming.errors import (
    CheckpointMisuse,
    ChildCycle,
    ConfigurationError,
    DuplicateTaskId,
    IdempotencyConflict,
    PayloadError,
    UnknownTask,
)
from chongming.plane.any_wait import AnyWaitJournal, decided_in_order, wait_any
from chongming.plane.outages import through_outages
from chongming.plane.step_outcomes import recorded_failure
from chongming.stores.base import TaskStore
from chongming.stores.children import SpawnedChild, child_fact_name
from chongming.stores.durable import StepRecord
from chongming.stores.ports.durable import DurableStore
from chongming.task_api.journal import ChildEnd, ChildHandle

__all__ = [
    "CHILD_STEP",
    "TaskPlane",
    "ended_children",
    "gathered_ends",
    "spawn_child",
    "stop_children",
]

#: The memoised step each enqueue of a child is recorded under.
CHILD_STEP = "child:enqueue"
#: How often a parent that cannot park (not a worker's claim) looks for its child's end.
POLL = 0.05
#: Ancestors looked at for a cycle (a deeper tree is not walked further).
MAX_DEPTH = 1000


class TaskPlane(Protocol):
    """What a durable task reaches its plane through: the controller that runs it."""

    @property
    def registry(self) -> Any: ...

    async def enqueue(self, name: str, *args: Any, **kwargs: Any) -> Any: ...

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
    ) -> SpawnedChild: ...

    async def signal(
        self, task_id: str, name: str, payload: Any = None, *, key: str | None = None
    ) -> bool: ...


class ChildJournal(Protocol):
    """The journal methods a child's enqueue and wait are built of (control/durable.py)."""

    task_id: str
    epoch: int

    def occurrence_of(self, name: str) -> int: ...

    async def step(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any: ...

    async def written_step(
        self, name: str, write: Callable[[StepRecord], Awaitable[StepRecord]]
    ) -> Any: ...

    async def wait_for_fact(
        self,
        name: str,
        *,
        timeout: float | None,
        check: Callable[[], Any] | None,
        poll_interval: float,
        beat: Callable[[], Awaitable[None]],
    ) -> Any: ...


async def spawn_child(
    journal: ChildJournal,
    store: TaskStore,
    plane: TaskPlane | None,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    key: str | None,
    options: Mapping[str, Any] | None = None,
) -> ChildHandle:
    """Enqueue the child once per task (memoised); its handle. Bad input writes nothing.

    ``options``: more keywords of the enqueue (a stored pipeline's node id,
    label, tag and upstream fact); their name and arguments were checked
    when the pipeline was enqueued, on a node that may serve other names.
    """
    parent = journal.task_id
    if plane is None:
        raise CheckpointMisuse(
            "ctx.child() needs the controller that runs this task; this journal has none "
            "(run the task on a Controller with a store)"
        )
    if options is None:
        registry = plane.registry
        if name not in registry:
            raise UnknownTask(name, tuple(registry.names))
        registry.get(name).bind_check(args, kwargs)
    extra = dict(options or {})
    if key is not None:
        await _refuse_cycle(store, parent, name, key)
    idempotency_key = (
        key if key is not None else f"{parent}:child:{journal.occurrence_of(CHILD_STEP)}"
    )

    def other_parents(child_id: str, linked: str | None) -> ConfigurationError:
        # The key named another task's child: it would never answer here.
        return ConfigurationError(
            f"ctx.child({name!r}, key={idempotency_key!r}): that key names task "
            f"{child_id!r}, a child of {linked!r}, not of this task; a child has one "
            "parent: give this child a key of its own"
        )

    async def write(template: StepRecord) -> StepRecord:
        """The child, its link and this step in one store call (``spawn_child``).

        What the enqueue refuses (its input, a key or task id already taken
        by another task) is recorded as the step's failure, as a step records
        its body's: a replay fails the same. Outages are retried around this
        call (every write in it is safe to repeat); a stale epoch fences.
        """
        try:
            spawned = await plane.enqueue_child(
                parent, journal.epoch, template, name, args, kwargs,
                idempotency_key=idempotency_key, **extra,
            )  # fmt: skip
        except _REFUSALS as refused:
            error: Exception = refused
        else:
            if spawned.step is not None:
                return spawned.step
            error = other_parents(spawned.enqueued.snapshot.task_id, spawned.parent)
        failed = dataclasses.replace(template, ok=False, value=recorded_failure(error))
        return await store.record_step(parent, journal.epoch, failed)

    async def enqueue() -> str:
        """The same in three calls, each safe to repeat: a store without ``spawn_child``."""
        queued = await plane.enqueue(
            name, *args, idempotency_key=idempotency_key, **extra, **kwargs
        )
        child_id: str = queued.task_id
        linked = await through_outages(lambda: store.link_child(parent, child_id))
        if linked is None:  # a store whose link_child does not answer
            linked = await through_outages(lambda: store.parent_of(child_id))
        if linked != parent:
            raise other_parents(child_id, linked)
        return child_id

    if _spawns_at_once(store):
        child_id = await journal.written_step(CHILD_STEP, write)
    else:
        child_id = await journal.step(CHILD_STEP, enqueue, (), {})
    return ChildHandle(task_id=str(child_id), name=name)


#: What an enqueue refuses for good (not an outage, not a fence): a recorded failure.
_REFUSALS = (ConfigurationError, PayloadError, DuplicateTaskId, IdempotencyConflict)


def _spawns_at_once(store: TaskStore) -> bool:
    """Whether ``store`` has a ``spawn_child`` of its own (PostgreSQL has not yet)."""
    return getattr(type(store), "spawn_child", DurableStore.spawn_child) is not (
        DurableStore.spawn_child
    )


class GatherJournal(ChildJournal, AnyWaitJournal, Protocol):
    """A journal that waits for one fact and decides many at once."""


async def gathered_ends(
    journal: GatherJournal, handles: Sequence[ChildHandle], beat: Callable[[], Awaitable[None]]
) -> list[ChildEnd]:
    """Each of ``handles``' ends, in order: the ones already in the store decided in one write.

    The same records as a fact wait per child (a replay of either reads the
    same), with one round trip for each run of children that ended before
    the parent looked instead of two per child.
    """
    names = [child_fact_name(handle.task_id) for handle in handles]
    ends: list[Any] = []
    while len(ends) < len(names):
        ready = await decided_in_order(journal, names[len(ends) :])
        if ready:
            ends.extend(ready)
            continue
        ends.append(
            await journal.wait_for_fact(
                names[len(ends)], timeout=None, check=None, poll_interval=POLL, beat=beat
            )
        )
    return [ChildEnd.from_fact(handle, end) for handle, end in zip(handles, ends, strict=True)]


async def ended_children(
    journal: AnyWaitJournal, handles: Sequence[ChildHandle], beat: Callable[[], Awaitable[None]]
) -> AsyncIterator[ChildEnd]:
    """Each of ``handles``' ends as it comes (a repeated handle once); see any_wait.py."""
    pending = {child_fact_name(handle.task_id): handle for handle in handles}
    while pending:
        for name, decision in await wait_any(journal, list(pending), beat):
            value = decision.value if isinstance(decision.value, dict) else {}
            yield ChildEnd.from_fact(pending.pop(name), value.get("fact"))


async def stop_children(
    store: TaskStore,
    stop: Callable[..., Awaitable[bool]],
    parent: str,
    reason: str | None,
    actor: str,
) -> None:
    """Ask each unfinished child of ``parent`` to stop (``stop`` cascades to theirs).

    The child's stop is recorded with the parent's ``reason`` (or says its
    parent was stopped). A store without child tasks has none to stop.
    """
    try:
        children = await store.children_of(parent)
    except NotImplementedError:
        return
    why = reason if reason is not None else f"its parent {parent!r} was stopped"
    unfinished = []
    for child in children:
        snapshot = await store.get(child)
        if snapshot is not None and not snapshot.status.is_terminal:
            unfinished.append(snapshot)
    # Those waiting in the queue first: each is written stopped at once, so the
    # slot a running child frees when it stops cannot go to one of them.
    unfinished.sort(key=lambda snapshot: snapshot.owner is not None)
    for snapshot in unfinished:
        await stop(snapshot.task_id, reason=why, actor=actor)


async def _refuse_cycle(store: TaskStore, parent: str, name: str, key: str) -> None:
    """A ``key`` under which this task or an ancestor was enqueued, with the same name."""
    task_id: str | None = parent
    for _ in range(MAX_DEPTH):
        if task_id is None:
            return
        current = task_id
        snapshot = await through_outages(functools.partial(store.get, current))
        if snapshot is None:
            return
        if snapshot.name == name and snapshot.idempotency_key == key:
            raise ChildCycle(name, key, current)
        task_id = await through_outages(functools.partial(store.parent_of, current))
