"""The final word on one task."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from chongming.state.records import Failure, JsonValue
from chongming.state.status import TaskStatus

__all__ = ["Outcome", "call_done_callback"]

_log = logging.getLogger("chongming.run")


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


def call_done_callback(callback: Callable[[Any], None], run: Any) -> None:
    """Call a done callback of ``run``; what it raises is logged, never passed on."""
    try:
        callback(run)
    except (Exception, asyncio.CancelledError):
        # A callback is plain code: nothing it raises may stop the others,
        # the countdown of wait_all() among them.
        _log.exception("a done callback of task %r raised", run.task_id)
