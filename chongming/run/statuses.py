"""The statuses as plain module constants, for the hot path.

Reading an enum member through its class (``TaskStatus.QUEUED``) goes through
the enum metaclass on Python 3.11, about as slow as a function call; a module
global is a dictionary read. The run's code compares against these.
"""

from __future__ import annotations

from chongming.state.status import TaskStatus

__all__ = [
    "BLOCKED",
    "CANCELLED",
    "FAILED",
    "LOST",
    "PAUSED",
    "PAUSING",
    "PENDING",
    "QUEUED",
    "RETRY_WAIT",
    "RUNNING",
    "SKIPPED",
    "STARTING",
    "STOPPED",
    "STOPPING",
    "SUCCEEDED",
]

PENDING = TaskStatus.PENDING
BLOCKED = TaskStatus.BLOCKED
QUEUED = TaskStatus.QUEUED
STARTING = TaskStatus.STARTING
RUNNING = TaskStatus.RUNNING
PAUSING = TaskStatus.PAUSING
PAUSED = TaskStatus.PAUSED
RETRY_WAIT = TaskStatus.RETRY_WAIT
STOPPING = TaskStatus.STOPPING
SUCCEEDED = TaskStatus.SUCCEEDED
FAILED = TaskStatus.FAILED
STOPPED = TaskStatus.STOPPED
CANCELLED = TaskStatus.CANCELLED
SKIPPED = TaskStatus.SKIPPED
LOST = TaskStatus.LOST
