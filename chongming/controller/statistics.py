"""The frozen view a controller gives of itself, and the counts it reads from the store."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from chongming.state.status import TaskStatus
from chongming.stores.nodes import TaskCount

__all__ = ["ControllerStats", "TaskTotals", "count_tasks", "local_totals"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ControllerStats:
    """Counts at one moment.

    With a store, ``total``, ``active``, ``by_status`` and ``by_owner`` are
    the store's: every node's tasks (a transition of a task held here that is
    not written yet is counted where it is now). Without one they are this
    controller's. ``held`` counts the tasks this controller holds in memory.

    The rest is this node's: ``holding_slot`` counts tasks that occupy an
    execution slot here (a paused task does); ``queued`` counts tasks waiting
    for one; ``per_bucket`` maps a bucket to its tasks holding a slot;
    ``cluster_slots`` the slots of each cluster-wide limit this node holds.
    """

    total: int
    active: int
    by_status: Mapping[str, int]
    queued: int
    holding_slot: int
    max_parallel: int
    per_bucket: Mapping[int, int]
    per_resource: Mapping[str, int]
    persist_failures: int = 0
    #: Slots of each cluster-wide limit this node holds in the store now.
    cluster_slots: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: Tasks per owner (``""``: none), from the store; empty without one.
    by_owner: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: Tasks this controller holds in memory now.
    held: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskTotals:
    """Task counts by status and owner: what ``stats()`` and ``chongming stats`` show."""

    total: int
    active: int
    by_status: Mapping[str, int]
    by_owner: Mapping[str, int]


def count_tasks(
    counts: Iterable[TaskCount],
    moved: Iterable[tuple[TaskStatus | None, TaskStatus]] = (),
) -> TaskTotals:
    """Totals of the store's grouped counts; ``moved``: (stored, now) of unwritten runs.

    Statuses and owners with no task are left out; both maps are sorted by key.
    """
    by_status: dict[TaskStatus, int] = {}
    by_owner: dict[str, int] = {}
    for count in counts:
        by_status[count.status] = by_status.get(count.status, 0) + count.count
        owner = count.owner or ""
        by_owner[owner] = by_owner.get(owner, 0) + count.count
    for stored, now in moved:
        if stored is not None:
            by_status[stored] = by_status.get(stored, 0) - 1
        by_status[now] = by_status.get(now, 0) + 1
    total = sum(by_status.values())
    active = sum(n for status, n in by_status.items() if not status.is_terminal)
    return TaskTotals(
        total=total,
        active=active,
        by_status={s.value: n for s, n in sorted(by_status.items(), key=_value) if n > 0},
        by_owner={owner: n for owner, n in sorted(by_owner.items()) if n > 0},
    )


def _value(item: tuple[TaskStatus, int]) -> str:
    return item[0].value


def local_totals(counts: Mapping[TaskStatus, int]) -> TaskTotals:
    """Totals of a controller without a store: its own runs (no owners to tell apart)."""
    totals = count_tasks(
        TaskCount(status=status, bucket=None, owner=None, count=count)
        for status, count in counts.items()
    )
    return dataclasses.replace(totals, by_owner={})
