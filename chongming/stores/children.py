"""Child tasks in a store: a task's parent, and the fact its end leaves for the parent.

A task enqueued by ``ctx.child`` / ``ctx.spawn`` names its parent
(``parent_id``, set by :meth:`~chongming.stores.ports.durable.DurableStore.link_child`).
When such a task reaches a terminal status, the *same* transaction writes the
fact :func:`child_fact_name` for the parent, valued :func:`child_end`, and
wakes the parent if it is parked waiting for it (like ``put_fact``). SQLite and
PostgreSQL do it in a trigger on the tasks table (migration 0013 / 0014), so
every path that ends a task (a worker's verdict, a stop, a cancel) delivers it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from chongming.state.records import TaskSnapshot
from chongming.state.serialize import failure_to_json

if TYPE_CHECKING:  # stores.durable and stores.queue import stores.checks, which imports this
    from chongming.stores.durable import StepRecord
    from chongming.stores.queue import Enqueued

__all__ = ["CHILD_FACT", "SpawnedChild", "child_end", "child_fact_name"]

#: The fact a child's end is delivered as: ``child:<child task id>``.
CHILD_FACT = "child:"


def child_fact_name(child_id: str) -> str:
    return f"{CHILD_FACT}{child_id}"


def child_end(snapshot: TaskSnapshot) -> dict[str, Any]:
    """The fact's value: ``{"status", "result", "failure"}`` (what the SQL triggers write)."""
    return {
        "status": snapshot.status.value,
        "result": snapshot.result,
        "failure": failure_to_json(snapshot.failure),
    }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SpawnedChild:
    """What ``spawn_child`` did in its one transaction.

    ``enqueued``: the child as stored (``created`` False when its key named a
    twin); ``parent``: the child's parent now; ``step``: the parent's step as
    recorded (its value the child's id), or ``None`` when the child already
    had another parent (then nothing was linked or recorded).
    """

    enqueued: Enqueued
    parent: str
    step: StepRecord | None
