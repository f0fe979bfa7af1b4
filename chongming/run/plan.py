"""What an attempt is given, and whom it reports to.

An :class:`Attempt` sees its run only through these two: a frozen
:class:`AttemptPlan` (what to call, with which limits) and an
:class:`AttemptListener` (where to report that it is running, paused or
finished). The run implements the listener; nothing else of it is visible.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from chongming.executors.base import Executor
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.state.records import JsonValue, Progress

if TYPE_CHECKING:
    from chongming.run.attempt import Attempt
    from chongming.run.verdict import Verdict

__all__ = ["AttemptListener", "AttemptPlan"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AttemptPlan:
    """Everything every attempt of one run needs; built once per run."""

    task_id: str
    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    executor: Executor | None  # None: a coroutine on the loop
    timeout: Timeout | None
    windows: ControlWindows
    artifact_root: Path
    upstream: Mapping[str, JsonValue] | None
    max_payload_bytes: int | None


class AttemptListener(Protocol):
    """What an attempt tells its run. All calls happen on the loop thread."""

    def attempt_running(self, attempt: Attempt) -> None:
        """The carrier is calling the function now."""

    def attempt_paused(self, attempt: Attempt, generation: int) -> None:
        """The function parked at a checkpoint for pause request ``generation``."""

    def attempt_ended(self, attempt: Attempt, verdict: Verdict) -> None:
        """The attempt is over; ``verdict`` says what may be recorded. Called once."""

    def report_progress(self, progress: Progress) -> None:
        """Hot path from ``ctx.progress``; may be called from a worker thread."""

    def spawn_attempt(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start the attempt's driver as a task its host owns."""
