"""Frozen records that cross layers: transitions, snapshots, progress, failures."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeAlias

from chongming.state.status import TaskStatus

__all__ = [
    "Failure",
    "FailureKind",
    "JsonValue",
    "Progress",
    "TaskSnapshot",
    "Transition",
]

#: A value that survives ``json.dumps(..., allow_nan=False)``; checked at the API.
JsonValue: TypeAlias = Any


class FailureKind(enum.StrEnum):
    """Why an attempt or a task failed. A timeout is a kind, never a state."""

    EXCEPTION = "exception"
    TIMEOUT_START = "timeout_start"
    TIMEOUT_ATTEMPT = "timeout_attempt"
    TIMEOUT_IDLE = "timeout_idle"
    RESULT_INVALID = "result_invalid"
    CRASHED = "crashed"
    LAUNCH_ERROR = "launch_error"
    LOST = "lost"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """What went wrong, kept apart from the status so a timeout can be retried."""

    kind: FailureKind
    message: str
    exception_type: str | None = None
    retryable: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """How far a task got; reported by ``ctx.progress`` on the hot path."""

    done: float
    total: float | None = None
    unit: str | None = None
    message: str | None = None

    def render(self) -> str:
        done = _number(self.done)
        text = done if self.total is None else f"{done}/{_number(self.total)}"
        return f"{text} {self.unit}" if self.unit else text


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """One append-only entry in a task's history."""

    task_id: str
    version: int
    from_status: TaskStatus
    to_status: TaskStatus
    at: datetime
    trigger: str
    actor: str = "system"
    reason: str | None = None
    attempt: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskSnapshot:
    """The latest known state of one task, as stored and as shown."""

    task_id: str
    name: str
    label: str
    status: TaskStatus
    status_version: int
    attempt: int
    max_attempts: int
    created_at: datetime
    updated_at: datetime
    bucket: int | None = None
    bucket_key: str | None = None
    tags: frozenset[str] = frozenset()
    priority: int = 0
    owner: str | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    progress: Progress | None = None
    failure: Failure | None = None
    result: JsonValue = None
    args: tuple[JsonValue, ...] = ()
    kwargs: Mapping[str, JsonValue] = dataclasses.field(default_factory=dict)
    # Work for any node: the registered version the task needs (None: any),
    # the earliest time a worker may claim it, and the caller's idempotency key.
    version: int | None = None
    not_before: datetime | None = None
    idempotency_key: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status.is_terminal

    def elapsed(self, now: datetime) -> float | None:
        """Seconds since the first start (to the finish when finished)."""
        if self.started_at is None:
            return None
        end = self.finished_at or now
        return max(0.0, (end - self.started_at).total_seconds())


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
