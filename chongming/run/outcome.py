"""The final word on one task."""

from __future__ import annotations

import dataclasses

from chongming.state.records import Failure, JsonValue
from chongming.state.status import TaskStatus

__all__ = ["Outcome"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How a task ended. ``value`` is the result only when it succeeded."""

    task_id: str
    status: TaskStatus
    value: JsonValue = None
    failure: Failure | None = None
    attempts: int = 0
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is TaskStatus.SUCCEEDED
