"""The 15 lifecycle states of a task."""

from __future__ import annotations

import enum

__all__ = ["ACTIVE_STATUSES", "CARRIER_STATUSES", "TERMINAL_STATUSES", "TaskStatus"]


class TaskStatus(enum.StrEnum):
    """Where a task is on its trajectory. Only the state machine writes it."""

    PENDING = "pending"
    BLOCKED = "blocked"
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    RETRY_WAIT = "retry_wait"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    LOST = "lost"

    # Hash as the plain string (consistent with StrEnum's equality): Enum's own
    # __hash__ is a Python function, and statuses key dicts and sets on the hot path.
    __hash__ = str.__hash__

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES

    @property
    def holds_carrier(self) -> bool:
        """True while an execution carrier (coroutine, thread, process) may exist."""
        return self in CARRIER_STATUSES


TERMINAL_STATUSES: frozenset[TaskStatus] = frozenset(
    {
        TaskStatus.SUCCEEDED,
        TaskStatus.FAILED,
        TaskStatus.STOPPED,
        TaskStatus.CANCELLED,
        TaskStatus.SKIPPED,
        TaskStatus.LOST,
    }
)
ACTIVE_STATUSES: frozenset[TaskStatus] = frozenset(TaskStatus) - TERMINAL_STATUSES
CARRIER_STATUSES: frozenset[TaskStatus] = frozenset(
    {
        TaskStatus.STARTING,
        TaskStatus.RUNNING,
        TaskStatus.PAUSING,
        TaskStatus.PAUSED,
        TaskStatus.STOPPING,
    }
)
