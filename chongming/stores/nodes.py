"""Records of the shared plane kept beside the tasks: nodes, and commands as the CLI sees them.

A *node* is one controller with a store. It registers under its owner name
and renews **one lease** — one row, whatever the number of tasks it holds —
judged by the store's clock. A task names its owner; whether that owner is
alive is the owner's node lease, never the task's heartbeat.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from chongming.state.status import TaskStatus

if TYPE_CHECKING:
    from chongming.state.records import TaskSnapshot

__all__ = [
    "Command",
    "CommandKind",
    "CommandRecord",
    "CommandState",
    "NodeInfo",
    "NodeRecord",
    "TaskCount",
    "served_by_live_nodes",
    "unserved_counts",
    "unserved_key",
]


class CommandKind(enum.StrEnum):
    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """A control request for a task held by another process.

    ``target_owner`` addresses the command to the node that holds the task
    (``None``: any node may claim it). ``claimed_by`` and
    ``lease_expires_at`` are filled in by the store when it is claimed.
    """

    command_id: str
    task_id: str
    kind: CommandKind
    created_at: datetime
    actor: str = "user"
    reason: str | None = None
    target_owner: str | None = None
    claimed_by: str | None = None
    lease_expires_at: datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NodeInfo:
    """What a node says of itself when it registers.

    ``incarnation`` is random per registration: a process that restarts
    under the same owner name is a new incarnation, and an old one that
    wakes up (SIGSTOP, a long GC pause) can tell it was replaced.
    ``owned_buckets`` is ``None`` when the node owns every bucket.
    ``serves``: what a worker claims from the queue, as ``name`` (an
    unversioned registration) or ``name@N``; empty for a node that claims nothing.
    """

    owner: str
    incarnation: str
    host: str
    pid: int
    version: str
    num_buckets: int
    owned_buckets: frozenset[int] | None = None
    serves: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NodeRecord:
    """A node row as read, with ``live`` judged by the store's clock at read time."""

    info: NodeInfo
    started_at: datetime
    renewed_at: datetime
    lease_expires_at: datetime
    live: bool


class CommandState(enum.StrEnum):
    PENDING = "pending"  # nobody holds it
    CLAIMED = "claimed"  # a node holds its lease
    DONE = "done"  # completed; ``outcome`` says what happened


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CommandRecord:
    """A command with what became of it, for ``chongming commands`` and callers."""

    command: Command
    state: CommandState
    outcome: str | None = None
    completed_at: datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskCount:
    """How many tasks share a status, bucket and owner (for stats and bucket reports)."""

    status: TaskStatus
    bucket: int | None
    owner: str | None
    count: int


def served_by_live_nodes(nodes: Iterable[NodeRecord]) -> frozenset[str]:
    """Every ``name`` / ``name@N`` some live node serves."""
    return frozenset(entry for node in nodes if node.live for entry in node.info.serves)


def unserved_counts(waiting: Iterable[TaskSnapshot], served: frozenset[str]) -> dict[str, int]:
    """``name@N`` (or ``name``) -> queued, unowned tasks that no live worker serves.

    An unversioned task is served by any version of its name; a versioned one
    only by that version. Such tasks wait, visibly, and never fail for it.
    """
    counts: dict[str, int] = {}
    names = _names(served)
    for snapshot in waiting:
        key = unserved_key(snapshot, served, names)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    return counts


def unserved_key(
    snapshot: TaskSnapshot, served: frozenset[str], names: frozenset[str] | None = None
) -> str | None:
    """The ``name`` or ``name@N`` no live worker serves for ``snapshot``, or ``None`` if served.

    ``names``: the bare names of ``served``, when the caller judges many tasks.
    """
    if snapshot.version is None:
        if snapshot.name in (_names(served) if names is None else names):
            return None
        return snapshot.name
    key = f"{snapshot.name}@{snapshot.version}"
    return None if key in served else key


def _names(served: frozenset[str]) -> frozenset[str]:
    return frozenset(entry.split("@", 1)[0] for entry in served)
