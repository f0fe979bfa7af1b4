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

from typing import Any

from chongming.state.records import TaskSnapshot
from chongming.state.serialize import failure_to_json

__all__ = ["CHILD_FACT", "child_end", "child_fact_name"]

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
